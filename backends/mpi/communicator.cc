#include "communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime.h"
#include "syncline/plugin_sdk/block_cache.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/validate.h"

namespace syncline::mpi_backend {
namespace {

using backend::SlSetError;

const backend::SlOpRules kRules = {"mpi", SL_DEVICE_CPU, -1,
                                   "the mpi backend moves host memory only; use "
                                   "SYNCLINE_BACKEND=nccl or cpu:mpi,cuda:nccl"};

bool IsCollective(sl_op_kind_t kind) { return kind != SL_OP_SEND && kind != SL_OP_RECV; }

Clock::time_point DeadlineAfter(int64_t timeout_ms) {
  return timeout_ms > 0 ? Clock::now() + std::chrono::milliseconds(timeout_ms)
                        : Clock::time_point::max();
}

// Drives `request` to its end by `deadline`; false when the deadline passed
// first (the request is then left to MPI).
bool WaitUntil(MPI_Request* request, Clock::time_point deadline, int* rc) {
  for (uint64_t spins = 0;; ++spins) {
    int done = 0;
    {
      MpiLock lock;
      *rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    }
    if (*rc != MPI_SUCCESS || done) return true;
    if ((spins & 63) == 63) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// Every rank adds itself to a counter in the communicator's store; waits
// until all `size` are in, or names the ranks that are not.
sl_result_t CheckIn(const sl_comm_config_t& config, sl_error_t* err) {
  const sl_store_t& store = *config.store;
  const std::string mine = "mpi/joined/" + std::to_string(config.rank);
  const char one = 1;
  if (sl_result_t rc = store.set(store.ctx, mine.c_str(), &one, 1, err); rc != SL_OK) return rc;
  int64_t joined = 0;
  if (sl_result_t rc = store.add(store.ctx, "mpi/joined", 1, &joined, err); rc != SL_OK) {
    return rc;
  }
  const Clock::time_point deadline = DeadlineAfter(config.timeout_ms);
  while (joined < config.size) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int r = 0; r < config.size; ++r) {
        const std::string key = "mpi/joined/" + std::to_string(r);
        void* value = nullptr;
        size_t len = 0;
        sl_error_t ignored;
        if (store.get(store.ctx, key.c_str(), 1, &value, &len, &ignored) == SL_OK) {
          store.free_value(store.ctx, value);
        } else {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      return SlSetError(err, SL_ERR_TIMEOUT,
                        "mpi comm_create: rank %d of %d: rank(s) %s did not join within %lld "
                        "ms (did every rank create this communicator?)",
                        config.rank, config.size, missing.c_str(),
                        static_cast<long long>(config.timeout_ms));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (sl_result_t rc = store.add(store.ctx, "mpi/joined", 0, &joined, err); rc != SL_OK) {
      return rc;
    }
  }
  return SL_OK;
}

// The backend options ("key=value;...", null or empty: defaults):
// allreduce_small_max=BYTES, allgather_small_max=BYTES,
// reduce_scatter_own_max=BYTES and broadcast_own_max=BYTES (work.h). False
// with the reason otherwise.
bool ParseOptions(const char* text, CommState* state, std::string* why) {
  const std::string options = text == nullptr ? "" : text;
  size_t at = 0;
  while (at < options.size()) {
    size_t end = options.find(';', at);
    if (end == std::string::npos) end = options.size();
    const std::string item = options.substr(at, end - at);
    at = end + 1;
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    bool parsed = false;
    for (auto [key, field] :
         {std::pair{"allreduce_small_max=", &state->allreduce_small_max},
          std::pair{"allgather_small_max=", &state->allgather_small_max},
          std::pair{"reduce_scatter_own_max=", &state->reduce_scatter_own_max},
          std::pair{"broadcast_own_max=", &state->broadcast_own_max}}) {
      const size_t n = std::strlen(key);
      const char* value = item.c_str() + n;
      if (item.compare(0, n, key) != 0 || *value < '0' || *value > '9') continue;
      char* rest = nullptr;
      const unsigned long long bytes = std::strtoull(value, &rest, 10);
      if (*rest != '\0') break;
      *field = bytes;
      parsed = true;
    }
    if (!parsed) {
      *why = "option '" + item +
             "': the mpi backend knows allreduce_small_max=BYTES, "
             "allgather_small_max=BYTES, reduce_scatter_own_max=BYTES and "
             "broadcast_own_max=BYTES only";
      return false;
    }
  }
  return true;
}

int TagUpperBound() {
  int* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
  return found && value != nullptr ? *value : 32767;  // the least MPI guarantees
}

}  // namespace

Communicator::Communicator(std::shared_ptr<CommState> state, int64_t timeout_ms)
    : state_(std::move(state)), timeout_ms_(timeout_ms), progress_([this] { Progress(); }) {
  CommunicatorCreated();
}

void Communicator::Progress() {
  constexpr size_t kBatch = 64;  // the oldest ops: later collectives wait on them
  std::vector<std::shared_ptr<Request>> batch;
  auto idle = kProgressIdleMin;
  std::unique_lock<std::mutex> stop(stop_mu_);
  while (!stopping_) {
    batch.clear();
    if (state_->waiters.load() == 0) {
      std::lock_guard<std::mutex> lock(state_->mu);
      for (const auto& request : state_->pending) {
        if (batch.size() == kBatch) break;
        if (request->done()) continue;
        if (request->SeenByProgress()) batch.push_back(request);
      }
    }
    if (batch.empty()) {
      // Nothing to drive: no op, or a thread waits and drives MPI itself,
      // or the ops were just posted (their waiter is likely on its way).
      // Each wake-up takes a core from the ranks (2 ranks on 2 cores here),
      // so the sleeps double while there is nothing, up to kProgressIdleMax,
      // also in a loop of ops each waited on at once.
      stop_cv_.wait_for(stop, idle);
      idle = std::min(idle * 2, kProgressIdleMax);
      continue;
    }
    idle = kProgressIdleMin;
    stop.unlock();
    for (const auto& request : batch) request->Advance();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    stop.lock();
  }
}

sl_result_t Communicator::Create(const sl_comm_config_t& config,
                                 std::unique_ptr<Communicator>* out, sl_error_t* err) {
  if (config.device != SL_DEVICE_CPU) {
    return SlSetError(err, SL_ERR_UNSUPPORTED, "mpi comm_create: %s", kRules.device_hint);
  }
  if (config.store == nullptr) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "mpi comm_create: no store");
  }
  if (sl_result_t rc = EnsureMpi(err); rc != SL_OK) return rc;
  int world_rank = 0, world_size = 0;
  {
    MpiLock lock;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  }
  if (world_rank != config.rank || world_size != config.size) {
    return SlSetError(
        err, SL_ERR_MISMATCH,
        "mpi comm_create: Syncline's rendezvous made this process rank %d of %d, but "
        "MPI_COMM_WORLD says rank %d of %d. The mpi backend runs on MPI's world as "
        "mpirun started it: launch with `mpirun -np N` and let the rendezvous read "
        "OMPI_COMM_WORLD_RANK/SIZE (unset SYNCLINE_RANK, SYNCLINE_WORLD_SIZE, RANK and "
        "WORLD_SIZE, or set them to MPI's values); sub-groups come from split, not from a "
        "smaller world",
        config.rank, config.size, world_rank, world_size);
  }
  if (sl_result_t rc = CheckIn(config, err); rc != SL_OK) return rc;
  auto state = std::make_shared<CommState>();
  if (std::string why; !ParseOptions(config.options, state.get(), &why)) {
    return SlSetError(err, SL_ERR_INVALID_ARGUMENT, "mpi comm_create: %s", why.c_str());
  }
  state->rank = world_rank;
  state->size = world_size;
  state->comm_id = config.comm_id;
  state->store = config.store;
  // Two duplicates: MPI's collectives and the user's sends on one, the
  // backend's own algorithms on the other (CommState::algo_comm).
  MPI_Request dups[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int rc;
  {
    MpiLock lock;
    rc = MPI_Comm_idup(MPI_COMM_WORLD, &state->comm, &dups[0]);
    if (rc == MPI_SUCCESS) {
      rc = MPI_Comm_idup(MPI_COMM_WORLD, &state->algo_comm, &dups[1]);
    }
  }
  const Clock::time_point deadline = DeadlineAfter(config.timeout_ms);
  for (MPI_Request& dup : dups) {
    if (rc == MPI_SUCCESS && !WaitUntil(&dup, deadline, &rc)) {
      SkipFinalizeAtExit();
      return SlSetError(
          err, SL_ERR_TIMEOUT,
          "mpi comm_create: rank %d of %d: MPI_Comm_idup of MPI_COMM_WORLD did "
          "not finish within %lld ms although every rank checked in",
          world_rank, world_size, static_cast<long long>(config.timeout_ms));
    }
  }
  if (rc != MPI_SUCCESS) {
    return SlSetError(err, SL_ERR_INTERNAL, "mpi comm_create: MPI_Comm_idup failed: %s",
                      MpiErrorText(rc).c_str());
  }
  out->reset(new Communicator(std::move(state), config.timeout_ms));
  return SL_OK;
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  progress_.join();
  CommunicatorDestroyed();
  state_->Leave();
  bool free_comm;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    while (!state_->pending.empty() && state_->pending.front()->done()) {
      state_->pending.pop_front();
    }
    free_comm = state_->pending.empty() && !state_->ops_left_in_mpi;
  }
  if (!free_comm) {
    // MPI still holds ops of this communicator: they fail here, and the MPI
    // communicator stays (freeing it under a running collective is erroneous).
    state_->Abort("mpi communicator " + std::to_string(state_->comm_id) +
                  " was destroyed with this op still running");
    return;
  }
  MpiLock lock;
  MPI_Comm_free(&state_->comm);
  MPI_Comm_free(&state_->algo_comm);
}

void Communicator::Abort() {
  state_->Abort("mpi communicator " + std::to_string(state_->comm_id) + " (rank " +
                std::to_string(state_->rank) + " of " + std::to_string(state_->size) +
                ") was aborted (comm_abort)");
}

int Communicator::Start(Request& request, MPI_Request* started) {
  const sl_op_t& op = request.op();
  const MPI_Comm comm = state_->comm;
  const int rank = state_->rank;
  const int size = state_->size;
  const MPI_Datatype type = MpiType(op.kind == SL_OP_BROADCAST || op.kind == SL_OP_RECV
                                        ? op.recv.dtype
                                        : op.send.dtype);
  MpiLock lock;
  switch (op.kind) {
    case SL_OP_ALLREDUCE: {
      const void* send = op.send.data == op.recv.data ? MPI_IN_PLACE : op.send.data;
      return MPI_Iallreduce(send, op.recv.data, static_cast<int>(op.recv.count), type,
                            MpiOp(op.redop, op.send.dtype), comm, started);
    }
    case SL_OP_BROADCAST:
      return MPI_Ibcast(op.recv.data, static_cast<int>(op.recv.count), type, op.root, comm,
                        started);
    case SL_OP_REDUCE: {
      const bool in_place = rank == op.root && op.send.data == op.recv.data;
      return MPI_Ireduce(in_place ? MPI_IN_PLACE : op.send.data, op.recv.data,
                         static_cast<int>(op.send.count), type, MpiOp(op.redop, op.send.dtype),
                         op.root, comm, started);
    }
    case SL_OP_ALLGATHER: {
      const size_t bytes = op.send.count * sl_dtype_size(op.send.dtype);
      const bool in_place =
          op.send.data != nullptr &&
          op.send.data == static_cast<unsigned char*>(op.recv.data) + rank * bytes;
      const int n = static_cast<int>(op.send.count);
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : request.SendData(), n, type,
                            op.recv.data, n, type, comm, started);
    }
    case SL_OP_REDUCE_SCATTER:
      return MPI_Ireduce_scatter_block(request.SendData(), op.recv.data,
                                       static_cast<int>(op.recv.count), type,
                                       MpiOp(op.redop, op.send.dtype), comm, started);
    case SL_OP_ALLTOALL: {
      const int n = static_cast<int>(op.recv.count / size);
      return MPI_Ialltoall(request.SendData(), n, type, op.recv.data, n, type, comm, started);
    }
    case SL_OP_BARRIER:
      return MPI_Ibarrier(comm, started);
    case SL_OP_SEND:
      return MPI_Isend(op.send.data, static_cast<int>(op.send.count), type, op.peer,
                       static_cast<int>(op.tag), comm, started);
    case SL_OP_RECV:
      return MPI_Irecv(op.recv.data, static_cast<int>(op.recv.count), type, op.peer,
                       static_cast<int>(op.tag), comm, started);
    default:
      return MPI_ERR_OP;
  }
}

sl_result_t Communicator::Post(const sl_op_t& op, std::shared_ptr<Request>* request,
                               sl_error_t* err) {
  std::string why;
  if (sl_result_t rc = backend::SlValidateOp(op, state_->rank, state_->size, kRules, &why);
      rc != SL_OK) {
    return SlSetError(err, rc, "mpi %s", why.c_str());
  }
  if (op.send.count > INT_MAX || op.recv.count > INT_MAX) {
    return SlSetError(err, SL_ERR_UNSUPPORTED,
                      "mpi %s: %zu elements; MPI counts are C ints (at most %d): split the op",
                      backend::SlOpName(op).c_str(), op.send.count > op.recv.count ? op.send.count : op.recv.count,
                      INT_MAX);
  }
  static const int tag_ub = TagUpperBound();
  if (!IsCollective(op.kind) && op.tag > static_cast<uint32_t>(tag_ub)) {
    return SlSetError(err, SL_ERR_UNSUPPORTED,
                      "mpi %s: tag %u is above this MPI's MPI_TAG_UB (%d): use a smaller tag",
                      backend::SlOpName(op).c_str(), op.tag, tag_ub);
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->aborted.load()) {
    return SlSetError(err, SL_ERR_ABORTED, "mpi %s: %s", backend::SlOpName(op).c_str(),
                      state_->abort_message.c_str());
  }
  sl_op_t timed = op;
  if (timed.timeout_ms == 0) timed.timeout_ms = timeout_ms_;
  const std::shared_ptr<Request> none;
  // One recycled block per op (block_cache.h), not a malloc and a free.
  auto posted = std::allocate_shared<Request>(
      backend::BlockAllocator<Request>(), timed, state_,
      IsCollective(op.kind) ? state_->last_collective : none);
  int rc;
  if (Request::IsSmallAllreduce(op, *state_)) {
    rc = posted->StartSmallAllreduce(state_->algo_ops++);
  } else if (Request::IsSmallAllgather(op, *state_)) {
    rc = posted->StartSmallAllgather(state_->algo_ops++);
  } else if (Request::IsOwnReduceScatter(op, *state_)) {
    rc = posted->StartOwnReduceScatter(state_->algo_ops++);
  } else if (Request::IsOwnBroadcast(op, *state_)) {
    rc = posted->StartOwnBroadcast(state_->algo_ops++);
  } else {
    MPI_Request started = MPI_REQUEST_NULL;
    rc = Start(*posted, &started);
    if (rc == MPI_SUCCESS) posted->Started(started);
  }
  if (rc != MPI_SUCCESS) {
    return SlSetError(err, SL_ERR_INTERNAL, "%s: MPI refused to start it: %s",
                      posted->Describe().c_str(), MpiErrorText(rc).c_str());
  }
  // Ops done since the last post leave the list now, after this one's
  // first message is out: freeing them does not delay it.
  while (!state_->pending.empty() && state_->pending.front()->done()) {
    state_->pending.pop_front();
  }
  state_->pending.push_back(posted);
  if (IsCollective(op.kind)) state_->last_collective = posted;
  *request = std::move(posted);
  return SL_OK;
}

sl_result_t Communicator::Split(int32_t color, int32_t key, const sl_store_t* store,
                                uint64_t id, std::unique_ptr<Communicator>* child,
                                sl_error_t* err) {
  child->reset();
  if (state_->aborted.load()) {
    std::lock_guard<std::mutex> lock(state_->mu);
    return SlSetError(err, SL_ERR_ABORTED, "mpi comm_split: %s", state_->abort_message.c_str());
  }
  // MPI_Comm_split blocks until every rank calls it: first meet in a
  // barrier that can give up, so that a rank that never splits is a
  // timeout, not a hang.
  MPI_Request barrier = MPI_REQUEST_NULL;
  int rc;
  {
    MpiLock lock;
    rc = MPI_Ibarrier(state_->comm, &barrier);
  }
  if (rc == MPI_SUCCESS && !WaitUntil(&barrier, DeadlineAfter(timeout_ms_), &rc)) {
    const std::string message = "mpi comm_split on rank " + std::to_string(state_->rank) +
                                " of " + std::to_string(state_->size) +
                                ": not every rank of the parent called split within " +
                                std::to_string(timeout_ms_) + " ms";
    state_->Abort(message + "; the parent is aborted (its barrier is left to MPI)");
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->ops_left_in_mpi = true;
    }
    SkipFinalizeAtExit();
    return SlSetError(err, SL_ERR_TIMEOUT, "%s", message.c_str());
  }
  MPI_Comm made = MPI_COMM_NULL;
  if (rc == MPI_SUCCESS) {
    MpiLock lock;
    rc = MPI_Comm_split(state_->comm, color < 0 ? MPI_UNDEFINED : color, key, &made);
  }
  if (rc != MPI_SUCCESS) {
    return SlSetError(err, SL_ERR_INTERNAL, "mpi comm_split: %s", MpiErrorText(rc).c_str());
  }
  if (made == MPI_COMM_NULL) return SL_OK;
  // The child's second communicator, for the backend's own algorithms.
  MPI_Comm algo = MPI_COMM_NULL;
  MPI_Request dup = MPI_REQUEST_NULL;
  {
    MpiLock lock;
    rc = MPI_Comm_idup(made, &algo, &dup);
  }
  if (rc == MPI_SUCCESS && !WaitUntil(&dup, DeadlineAfter(timeout_ms_), &rc)) {
    SkipFinalizeAtExit();
    return SlSetError(
        err, SL_ERR_TIMEOUT,
        "mpi comm_split: MPI_Comm_idup of the new communicator did not finish "
        "within %lld ms",
        static_cast<long long>(timeout_ms_));
  }
  if (rc != MPI_SUCCESS) {
    return SlSetError(err, SL_ERR_INTERNAL, "mpi comm_split: MPI_Comm_idup failed: %s",
                      MpiErrorText(rc).c_str());
  }
  auto state = std::make_shared<CommState>();
  state->comm = made;
  state->algo_comm = algo;
  state->allreduce_small_max = state_->allreduce_small_max;
  state->allgather_small_max = state_->allgather_small_max;
  state->reduce_scatter_own_max = state_->reduce_scatter_own_max;
  state->broadcast_own_max = state_->broadcast_own_max;
  state->comm_id = id;
  state->store = store;
  {
    MpiLock lock;
    MPI_Comm_rank(made, &state->rank);
    MPI_Comm_size(made, &state->size);
  }
  child->reset(new Communicator(std::move(state), timeout_ms_));
  return SL_OK;
}

}  // namespace syncline::mpi_backend
