#include "work.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "runtime.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::mpi_backend {
namespace {

using Clock = std::chrono::steady_clock;

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
    for (const auto& request : failing) {
      if (!request->done()) ops_left_in_mpi = true;
    }
    if (ops_left_in_mpi) SkipFinalizeAtExit();
  }
  for (const auto& request : failing) {
    if (request.get() != except) request->Complete(SL_ERR_ABORTED, message);
  }
}

Request::Request(const sl_op_t& op, std::shared_ptr<CommState> comm,
                 std::shared_ptr<Request> prev)
    : op_(op), comm_(std::move(comm)), clock_(op.timeout_ms), prev_(std::move(prev)) {
  // Sends and receives need no turn; a collective waits for the one before.
  if (IsP2p(op_) || prev_ == nullptr || prev_->done()) {
    clock_.Start(Clock::now());
    prev_.reset();
  }
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
  request_ = request;
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
  if (op_.kind == SL_OP_RECV && request_ != MPI_REQUEST_NULL) {
    // A receive can be cancelled: its buffer is ours again once MPI says so.
    MpiLock lock;
    MPI_Cancel(&request_);
    MPI_Status status;
    MPI_Wait(&request_, &status);
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

bool Request::Advance() const {
  if (outcome_.done()) return true;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return outcome_.done();  // another thread is on it
  if (outcome_.done() || comm_->aborted.load()) return outcome_.done();
  int finished = 0;
  MPI_Status status;
  int rc;
  {
    MpiLock mpi;
    rc = MPI_Test(&request_, &finished, &status);
  }
  if (rc != MPI_SUCCESS) {
    const std::string message = Describe() + ": MPI_Test failed: " + MpiErrorText(rc);
    outcome_.Complete(SL_ERR_INTERNAL, message);
    comm_->Abort("mpi communicator aborted: " + message, this);
    return true;
  }
  if (finished) {
    Finish(status);
    return true;
  }
  const Clock::time_point now = Clock::now();
  if (!clock_.started() && (prev_ == nullptr || prev_->done())) {
    clock_.Start(now);
    prev_.reset();
  }
  if (clock_.Expired(now)) {
    TimeOut();
    return true;
  }
  return false;
}

sl_result_t Request::Test(int* done, sl_error_t* err) const {
  Advance();
  return outcome_.Test(done, err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) const {
  const Clock::time_point until = backend::SlWaitLimit(timeout_ms);
  const Clock::time_point start = Clock::now();
  for (uint64_t spins = 0;; ++spins) {
    if (Advance()) return outcome_.Report(err);
    if ((spins & 63) != 63) continue;
    const Clock::time_point now = Clock::now();
    if (now >= until) return backend::SlWaitTimedOut(err, Describe(), timeout_ms);
    // Long waits are waits on peers: leave the core to them.
    if (now - start > std::chrono::milliseconds(200)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace syncline::mpi_backend
