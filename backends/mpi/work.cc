#include "work.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "runtime.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::mpi_backend {
namespace {

bool IsP2p(const sl_op_t& op) { return op.kind == SL_OP_SEND || op.kind == SL_OP_RECV; }

bool Overlap(const sl_buffer_t& a, const sl_buffer_t& b) {
  const auto* a0 = static_cast<const unsigned char*>(a.data);
  const auto* b0 = static_cast<const unsigned char*>(b.data);
  if (a0 == nullptr || b0 == nullptr) return false;
  const unsigned char* a1 = a0 + a.count * sl_dtype_size(a.dtype);
  const unsigned char* b1 = b0 + b.count * sl_dtype_size(b.dtype);
  return a0 < b1 && b0 < a1;
}

}  // namespace

void CommState::Abort(const std::string& message, const Request* except) {
  std::deque<std::shared_ptr<Request>> failing;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!aborted.load()) {
      abort_message = message;
      aborted.store(true);
    }
    failing.swap(pending);
    last_collective.reset();
    // The op that failed (timed out, or its peer left) is still in MPI too.
    if (except != nullptr) ops_left_in_mpi = true;
    for (const auto& request : failing) {
      if (!request->done()) ops_left_in_mpi = true;
    }
    if (ops_left_in_mpi) SkipFinalizeAtExit();
  }
  for (const auto& request : failing) {
    if (request.get() != except) request->Complete(SL_ERR_ABORTED, message);
  }
}

void CommState::AdvancePending(const Request* except) {
  constexpr size_t kBatch = 64;
  std::shared_ptr<Request> batch[kBatch];
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& request : pending) {
      if (n == kBatch) break;
      if (request.get() != except && !request->done()) batch[n++] = request;
    }
  }
  for (size_t i = 0; i < n; ++i) batch[i]->Advance();
}

std::string CommState::RanksThatLeft() {
  std::lock_guard<std::mutex> lock(mu);
  if (store == nullptr) return "";
  sl_error_t ignored;
  int64_t left = 0;
  if (store->add(store->ctx, "mpi/left", 0, &left, &ignored) != SL_OK || left == 0) return "";
  std::string ranks;
  for (int r = 0; r < size; ++r) {
    const std::string key = "mpi/left/" + std::to_string(r);
    void* value = nullptr;
    size_t len = 0;
    if (store->get(store->ctx, key.c_str(), 1, &value, &len, &ignored) == SL_OK) {
      store->free_value(store->ctx, value);
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  return ranks.empty() ? "?" : ranks;
}

void CommState::Leave() {
  std::lock_guard<std::mutex> lock(mu);
  if (store == nullptr) return;
  sl_error_t ignored;
  const std::string key = "mpi/left/" + std::to_string(rank);
  const char one = 1;
  store->set(store->ctx, key.c_str(), &one, 1, &ignored);
  int64_t left = 0;
  store->add(store->ctx, "mpi/left", 1, &left, &ignored);
  store = nullptr;
}

Request::Request(const sl_op_t& op, std::shared_ptr<CommState> comm,
                 const std::shared_ptr<Request>& prev)
    : op_(op),
      comm_(std::move(comm)),
      // The clock is read first when a thread first checks the op (Advance).
      clock_(op.timeout_ms, Clock::time_point()) {
  // Sends and receives need no turn; a collective waits for the one before.
  // Copied only when it is needed: a reference count is atomic.
  if (!IsP2p(op_) && prev != nullptr && !prev->done()) prev_ = prev;
}

std::string Request::Describe() const {
  return "mpi " + backend::SlDescribeOp(op_) + " on rank " + std::to_string(comm_->rank) +
         " of " + std::to_string(comm_->size);
}

const void* Request::SendData() {
  const bool copy = (op_.kind == SL_OP_REDUCE_SCATTER || op_.kind == SL_OP_ALLTOALL ||
                     op_.kind == SL_OP_ALLGATHER) &&
                    Overlap(op_.send, op_.recv);
  if (!copy) return op_.send.data;
  const size_t bytes = op_.send.count * sl_dtype_size(op_.send.dtype);
  send_copy_.assign(static_cast<const unsigned char*>(op_.send.data),
                    static_cast<const unsigned char*>(op_.send.data) + bytes);
  return send_copy_.data();
}

void Request::Started(MPI_Request request) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[0] = request;
}

bool Request::IsSmallAllreduce(const sl_op_t& op, const CommState& comm) {
  const bool power_of_two = comm.size >= 2 && (comm.size & (comm.size - 1)) == 0;
  return op.kind == SL_OP_ALLREDUCE && power_of_two &&
         op.recv.count * sl_dtype_size(op.recv.dtype) <= comm.allreduce_small_max;
}

namespace {

// The first tag of the backend's own op number `number`: 32 tags per op (a
// step each; 2^31 ranks at most), wrapping below MPI_TAG_UB: ops that far
// apart are never in flight together.
int TagBase(uint64_t number) {
  constexpr int kTagsPerOp = 32;
  constexpr uint64_t kOps = 32767 / kTagsPerOp;  // the least MPI_TAG_UB there is
  return static_cast<int>(number % kOps) * kTagsPerOp;
}

}  // namespace

int Request::StartSmallAllreduce(uint64_t number) {
  tag_base_ = TagBase(number);
  const size_t bytes = op_.recv.count * sl_dtype_size(op_.recv.dtype);
  // The partial result lives in the receive buffer from the start.
  if (op_.send.data != op_.recv.data && bytes > 0) {
    std::memmove(op_.recv.data, op_.send.data, bytes);
  }
  if (bytes <= kInlineScratch) {
    scratch_ = inline_scratch_;
  } else {
    heap_scratch_.reset(new unsigned char[bytes]);
    scratch_ = heap_scratch_.get();
  }
  std::lock_guard<std::mutex> lock(mu_);
  step_ = 0;
  num_requests_ = 2;
  return PostStep();
}

bool Request::IsSmallAllgather(const sl_op_t& op, const CommState& comm) {
  return op.kind == SL_OP_ALLGATHER && comm.size >= 2 &&
         op.recv.count * sl_dtype_size(op.recv.dtype) <= comm.allgather_small_max;
}

int Request::StartSmallAllgather(uint64_t number) {
  tag_base_ = TagBase(number);
  const size_t block = op_.send.count * sl_dtype_size(op_.send.dtype);
  unsigned char* own = static_cast<unsigned char*>(op_.recv.data) + comm_->rank * block;
  // In place: the own block is already where it belongs. Otherwise it is
  // sent from the input (or a copy of it, SendData) and copied in.
  own_block_ = op_.send.data == own ? own : SendData();
  std::lock_guard<std::mutex> lock(mu_);
  step_ = 0;
  num_requests_ = 2;
  const int rc = PostAllgatherStep();
  if (own_block_ != own && block > 0) std::memcpy(own, own_block_, block);
  return rc;
}

int Request::PostAllgatherStep() const {
  const int size = comm_->size;
  const int rank = comm_->rank;
  const int count = static_cast<int>(op_.send.count);
  const MPI_Datatype type = MpiType(op_.send.dtype);
  const size_t block = op_.send.count * sl_dtype_size(op_.send.dtype);
  auto* recv = static_cast<unsigned char*>(op_.recv.data);
  const int from = ((rank - step_ - 1) % size + size) % size;
  const int sent = ((rank - step_) % size + size) % size;
  const void* send = step_ == 0 ? own_block_ : recv + sent * block;
  return PostRingStep(recv + from * block, send, count, type);
}

int Request::PostRingStep(void* from_left, const void* to_right, int count,
                          MPI_Datatype type) const {
  const int size = comm_->size;
  MpiLock mpi;
  int rc = MPI_Irecv(from_left, count, type, (comm_->rank + size - 1) % size, tag_base_,
                     comm_->algo_comm, &requests_[0]);
  if (rc != MPI_SUCCESS) return rc;
  return MPI_Isend(to_right, count, type, (comm_->rank + 1) % size, tag_base_,
                   comm_->algo_comm, &requests_[1]);
}

bool Request::IsOwnReduceScatter(const sl_op_t& op, const CommState& comm) {
  const size_t bytes = op.send.count * sl_dtype_size(op.send.dtype);
  return op.kind == SL_OP_REDUCE_SCATTER && comm.size >= 2 &&
         bytes <= comm.reduce_scatter_own_max &&
         (comm.size == 2 || bytes >= kReduceScatterRingMin);
}

int Request::StartOwnReduceScatter(uint64_t number) {
  tag_base_ = TagBase(number);
  own_block_ = SendData();
  const size_t block = op_.recv.count * sl_dtype_size(op_.recv.dtype);
  if (comm_->size > 2 && block > 0) {
    heap_scratch_.reset(new unsigned char[2 * block]);
    scratch_ = heap_scratch_.get();
  }
  std::lock_guard<std::mutex> lock(mu_);
  step_ = 0;
  num_requests_ = 2;
  return PostReduceScatterStep();
}

int Request::PostReduceScatterStep() const {
  const int size = comm_->size;
  const int rank = comm_->rank;
  const int count = static_cast<int>(op_.recv.count);
  const MPI_Datatype type = MpiType(op_.recv.dtype);
  const size_t block = op_.recv.count * sl_dtype_size(op_.recv.dtype);
  const int sent = ((rank - step_ - 1) % size + size) % size;
  const void* send = step_ == 0
                         ? static_cast<const unsigned char*>(own_block_) + sent * block
                         : scratch_ + ((step_ - 1) % 2) * block;
  void* into = step_ == size - 2 ? op_.recv.data : scratch_ + (step_ % 2) * block;
  return PostRingStep(into, send, count, type);
}

bool Request::IsOwnBroadcast(const sl_op_t& op, const CommState& comm) {
  const size_t bytes = op.recv.count * sl_dtype_size(op.recv.dtype);
  return op.kind == SL_OP_BROADCAST && comm.size >= 2 &&
         bytes <= comm.broadcast_own_max &&
         (comm.size == 2 || bytes <= kBroadcastTreeMax);
}

int Request::StartOwnBroadcast(uint64_t number) {
  tag_base_ = TagBase(number);
  const int size = comm_->size;
  const int v = (comm_->rank - op_.root + size) % size;
  int child = 1;  // the root's farthest child: the largest power of two below size
  while (child * 2 < size) child *= 2;
  std::lock_guard<std::mutex> lock(mu_);
  next_child_ = v == 0 ? child : (v & -v) / 2;
  step_ = 0;
  num_requests_ = 2;
  return PostBroadcastStep();
}

int Request::PostBroadcastStep() const {
  const int size = comm_->size;
  const int root = op_.root;
  const int v = (comm_->rank - root + size) % size;
  const MPI_Datatype type = MpiType(op_.recv.dtype);
  auto* data = static_cast<unsigned char*>(op_.recv.data);
  const MPI_Comm comm = comm_->algo_comm;
  requests_[0] = requests_[1] = MPI_REQUEST_NULL;
  MpiLock mpi;
  const int count = static_cast<int>(op_.recv.count);
  if (step_ == 0 && v > 0) {  // from the parent first
    const int parent = (v - (v & -v) + root) % size;
    return MPI_Irecv(data, count, type, parent, tag_base_, comm, &requests_[0]);
  }
  for (MPI_Request& request : requests_) {
    while (next_child_ > 0 && v + next_child_ >= size) next_child_ /= 2;
    if (next_child_ == 0) break;
    const int child = (v + next_child_ + root) % size;
    next_child_ /= 2;
    if (int rc = MPI_Isend(data, count, type, child, tag_base_, comm, &request);
        rc != MPI_SUCCESS) {
      return rc;
    }
  }
  return MPI_SUCCESS;
}

int Request::PostStep() const {
  const int partner = comm_->rank ^ (1 << step_);
  const int count = static_cast<int>(op_.recv.count);
  const MPI_Datatype type = MpiType(op_.recv.dtype);
  MpiLock mpi;
  int rc = MPI_Irecv(scratch_, count, type, partner, tag_base_ + step_,
                     comm_->algo_comm, &requests_[0]);
  if (rc != MPI_SUCCESS) return rc;
  return MPI_Isend(op_.recv.data, count, type, partner, tag_base_ + step_,
                   comm_->algo_comm, &requests_[1]);
}

bool Request::StepDone(int* rc) const {
  if (op_.kind == SL_OP_BROADCAST) {
    ++step_;
    *rc = PostBroadcastStep();
    // Nothing posted: this rank's part is over.
    return *rc != MPI_SUCCESS ||
           (requests_[0] == MPI_REQUEST_NULL && requests_[1] == MPI_REQUEST_NULL);
  }
  if (op_.kind == SL_OP_REDUCE_SCATTER) {
    const int size = comm_->size;
    const size_t block = op_.recv.count * sl_dtype_size(op_.recv.dtype);
    const int received = ((comm_->rank - step_ - 2) % size + size) % size;
    void* into = step_ == size - 2 ? op_.recv.data : scratch_ + (step_ % 2) * block;
    {
      MpiLock mpi;
      *rc = MPI_Reduce_local(
          static_cast<const unsigned char*>(own_block_) + received * block, into,
          static_cast<int>(op_.recv.count), MpiType(op_.recv.dtype),
          MpiOp(op_.redop, op_.recv.dtype));
    }
    if (*rc != MPI_SUCCESS) return true;
    ++step_;
    if (step_ >= size - 1) return true;
    *rc = PostReduceScatterStep();
    return *rc != MPI_SUCCESS;
  }
  if (op_.kind == SL_OP_ALLGATHER) {
    ++step_;
    if (step_ >= comm_->size - 1) return true;
    *rc = PostAllgatherStep();
    return *rc != MPI_SUCCESS;
  }
  {
    MpiLock mpi;
    *rc =
        MPI_Reduce_local(scratch_, op_.recv.data, static_cast<int>(op_.recv.count),
                         MpiType(op_.recv.dtype), MpiOp(op_.redop, op_.recv.dtype));
  }
  if (*rc != MPI_SUCCESS) return true;
  ++step_;
  if ((1 << step_) >= comm_->size) return true;
  *rc = PostStep();
  return *rc != MPI_SUCCESS;
}

void Request::Finish(const MPI_Status& status) const {
  prev_.reset();
  if (op_.kind == SL_OP_RECV) {
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    if (cancelled) {
      outcome_.Complete(SL_ERR_TIMEOUT,
                        Describe() + ": timed out after " + clock_.Running() +
                            " with no matching send (the receive was cancelled; the "
                            "communicator stays usable)");
      return;
    }
    int received = 0;
    MPI_Get_count(&status, MpiType(op_.recv.dtype), &received);
    if (static_cast<size_t>(received) != op_.recv.count) {
      outcome_.Complete(SL_ERR_MISMATCH,
                        Describe() + ": the matching send carried " + std::to_string(received) +
                            " elements, not " + std::to_string(op_.recv.count) +
                            " (post sends and receives of the same count)");
      return;
    }
  }
  if (op_.redop == SL_AVG) {
    const bool here = op_.kind == SL_OP_ALLREDUCE || op_.kind == SL_OP_REDUCE_SCATTER ||
                      (op_.kind == SL_OP_REDUCE && op_.root == comm_->rank);
    if (here) backend::SlDivideBy(op_.recv.data, op_.recv.count, op_.recv.dtype, comm_->size);
  }
  outcome_.Complete(SL_OK, "");
}

void Request::TimeOut() const {
  if (op_.kind == SL_OP_RECV && requests_[0] != MPI_REQUEST_NULL) {
    // A receive can be cancelled: its buffer is ours again once MPI says so.
    MpiLock lock;
    MPI_Cancel(&requests_[0]);
    MPI_Status status;
    MPI_Wait(&requests_[0], &status);
    Finish(status);
    return;
  }
  const std::string message =
      Describe() + ": timed out after " + clock_.Running() +
      ". MPI cannot cancel it, so this communicator is aborted: its later ops fail, MPI "
      "may still write into this op's buffers, and the job should exit (see the mpi "
      "backend's README)";
  outcome_.Complete(SL_ERR_TIMEOUT, message);
  comm_->Abort("mpi communicator " + std::to_string(comm_->comm_id) +
                   " aborted after a timeout: " + message,
               this);
}

bool Request::Advance(bool check_deadline) const {
  if (outcome_.done()) return true;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return outcome_.done();  // another thread is on it
  if (outcome_.done() || comm_->aborted.load()) return outcome_.done();
  int finished = 0;
  MPI_Status status[2];
  int rc;
  for (;;) {
    {
      MpiLock mpi;
      rc = num_requests_ == 1 ? MPI_Test(&requests_[0], &finished, &status[0])
                              : MPI_Testall(num_requests_, requests_, &finished, status);
    }
    // A small allreduce's step is done: the next one may be too, at once.
    if (rc != MPI_SUCCESS || !finished || step_ < 0 || StepDone(&rc) || rc != MPI_SUCCESS) {
      break;
    }
  }
  if (rc != MPI_SUCCESS) {
    const std::string message = Describe() + ": MPI_Test failed: " + MpiErrorText(rc);
    outcome_.Complete(SL_ERR_INTERNAL, message);
    comm_->Abort("mpi communicator aborted: " + message, this);
    return true;
  }
  if (finished) {
    Finish(status[0]);
    return true;
  }
  if (!check_deadline) return false;
  const Clock::time_point now = Clock::now();
  if (!clock_.started()) {
    // The first look is the op's posting time for messages, and its deadline
    // starts then unless a collective before it still runs (work.h).
    if (!looked_) {
      clock_.SetPosted(now);
      looked_ = true;
    }
    if (prev_ == nullptr || prev_->done()) {
      clock_.Start(now);
      prev_.reset();
    }
  }
  if (clock_.Expired(now)) {
    TimeOut();
    return true;
  }
  return PeerGone(now);
}

bool Request::PeerGone(Clock::time_point now) const {
  // Only ops that have waited a while look (a store round trip each time).
  constexpr auto kFirstLook = std::chrono::milliseconds(200);
  constexpr auto kEvery = std::chrono::milliseconds(250);
  constexpr auto kGrace = std::chrono::seconds(1);
  if (now - clock_.started_at() < kFirstLook || now < next_peer_check_) return false;
  next_peer_check_ = now + kEvery;
  if (peer_gone_since_ == Clock::time_point()) {
    if (comm_->RanksThatLeft().empty()) return false;
    // It may still finish with what the peer sent before it left.
    peer_gone_since_ = now;
    return false;
  }
  if (now - peer_gone_since_ < kGrace) return false;
  const std::string message = Describe() + ": rank(s) " + comm_->RanksThatLeft() +
                              " destroyed the communicator while this op waited on them";
  outcome_.Complete(SL_ERR_PEER, message);
  comm_->Abort("mpi communicator " + std::to_string(comm_->comm_id) + " aborted: " + message,
               this);
  return true;
}

sl_result_t Request::Test(int* done, sl_error_t* err) const {
  Advance();
  return outcome_.Test(done, err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) const {
  // The caller's thread drives MPI itself (MPI_Test), with no hand-off to
  // the progress thread. The first 64 spins read no clock: a small op is
  // usually done within them, and a clock read is a good part of this
  // path's cost. Deadlines and peers are checked from the 64th spin on,
  // every 64 spins, as before (an op's deadline is seconds, not spins).
  for (int spins = 0; spins < 63; ++spins) {
    if (Advance(/*check_deadline=*/false)) return outcome_.Report(err);
  }
  // Only a wait that lasts says so (two atomic operations fewer for an op
  // done within the spins above). The count only keeps the progress thread
  // out of a waiter's way; it drives only ops it saw at an earlier wake-up
  // (20 us to 16 ms before), and Advance lets one thread at a time test an
  // op, so a short wait it meets is still safe.
  struct Waiting {
    explicit Waiting(CommState& c) : comm(c) { comm.waiters.fetch_add(1); }
    ~Waiting() { comm.waiters.fetch_sub(1); }
    CommState& comm;
  } waiting(*comm_);
  // One clock read for both (about 33 ns here, a part of a 64 KiB op's
  // margin).
  const Clock::time_point start = Clock::now();
  const Clock::time_point until = backend::SlWaitLimit(timeout_ms, start);
  for (uint64_t spins = 0;; ++spins) {
    // The clock is read every 64th spin only: a spin is one MPI_Test.
    if (Advance(/*check_deadline=*/(spins & 63) == 0)) return outcome_.Report(err);
    if ((spins & 63) != 63) continue;
    comm_->AdvancePending(this);
    const Clock::time_point now = Clock::now();
    if (now >= until) return backend::SlWaitTimedOut(err, Describe(), timeout_ms);
    // Long waits are waits on peers: leave the core to them. Not in the
    // first millisecond: a yield cost 0.8 us on an AMD EPYC VM here (a
    // 64 KiB op runs 12-35 us there), and an op that short is rarely
    // waiting on a descheduled peer.
    if (now - start > std::chrono::milliseconds(200)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    } else if (now - start > std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    }
  }
}

}  // namespace syncline::mpi_backend
