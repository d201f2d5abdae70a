// work.h: the request object behind each sl_request_t of the NCCL backend.
//
// A Request is one posted op: a copy of the sl_op_t, the event recorded on
// the communicator's stream right after the op's NCCL call (`done_event`),
// its deadline, and how it ended. It is shared between the caller's handle
// (sl_request_t, freed by request_free) and the communicator's pending
// list, so freeing a handle early keeps the event alive until the op ends.
//
// Completion has two sources, and the first one wins (Complete() is
// idempotent):
//   - success: whoever first sees the done event complete (request_test,
//     request_wait, or the watchdog's sweep);
//   - failure: the watchdog or Abort(), when the communicator breaks or is
//     aborted, with the op, its sequence number and the NCCL reason.
// A failure that comes after the event completed is ignored, so an op that
// finished before an abort still reports success.
//
// Waiting, two ways:
//   - request_wait (Wait) blocks the calling host thread. It polls the
//     event (spinning briefly, then sleeping with a growing back-off capped
//     at 1 ms) rather than calling cudaEventSynchronize, because that call
//     has no timeout and could not be woken by the watchdog.
//   - request_stream_wait (StreamWait) does not block the host: it makes the
//     caller's stream wait on the done event (cudaStreamWaitEvent), which is
//     what Work::WaitStream and PyTorch's work.wait() on NCCL do. The wait
//     is captured when queued, so the event's later reuse from the pool
//     cannot affect it.
//
// Thread safety: every method may be called from any thread.
#ifndef SYNCLINE_BACKENDS_NCCL_WORK_H_
#define SYNCLINE_BACKENDS_NCCL_WORK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "backends/nccl/cuda_handles.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/completion.h"
#include "syncline/plugin_sdk/op_clock.h"

namespace syncline::nccl_backend {

using Clock = std::chrono::steady_clock;

class Request {
 public:
  // `op` is copied (its buffers are views; the caller keeps them alive).
  // `where` ("rank 1/4") is used in messages; `device` is the communicator's
  // CUDA device. Its deadline counts from clock().Start(): when the op
  // before it on the communicator's stream has finished (op_clock.h).
  Request(const sl_op_t& op, std::string where, int device, Event done_event);

  const sl_op_t& op() const { return op_; }
  backend::OpClock& clock() { return clock_; }
  const backend::OpClock& clock() const { return clock_; }
  // Clock::time_point::max() when the op has no deadline or has not started.
  Clock::time_point deadline() const { return clock_.deadline(); }
  cudaEvent_t done_event() const { return done_event_.get(); }

  // "allreduce #5 (bf16 x 1001, avg)", for messages.
  std::string Describe() const;
  const std::string& where() const { return where_; }

  // Completes the request; false (and no change) if it had already ended.
  bool Complete(sl_result_t code, std::string message);

  // Condemn(): from now on a completed done event no longer counts as
  // success (the communicator is being aborted, which also ends kernels
  // that did not finish); the request waits for Complete() with the
  // failure. No effect on a request that already completed.
  void Condemn();

  // Queries the done event once and completes the request if it has
  // finished (or if the query reports a CUDA error). Returns true when the
  // request is complete. Never blocks.
  bool Poll();

  // request_test / request_wait: see plugin_abi.h and the file comment.
  sl_result_t Test(int* done, sl_error_t* err);
  sl_result_t Wait(int64_t timeout_ms, sl_error_t* err);
  // request_stream_wait: see plugin_abi.h and the file comment. `stream` is
  // a cudaStream_t on this request's device (nullptr: its legacy default
  // stream). Never blocks the host.
  sl_result_t StreamWait(void* stream, sl_error_t* err);

 private:

  const sl_op_t op_;
  const std::string where_;
  const int device_;
  backend::OpClock clock_;
  // Recorded once by Post() before the request is shared; then only queried.
  const Event done_event_;

  // mu_ orders Condemn() against the event's success in Poll(): a request
  // completes through outcome_ while holding it.
  mutable std::mutex mu_;
  bool condemned_ ABSL_GUARDED_BY(mu_) = false;
  backend::OpOutcome outcome_;
};

}  // namespace syncline::nccl_backend

// The opaque handle of the C ABI: one per request_* caller.
struct sl_request {
  std::shared_ptr<syncline::nccl_backend::Request> request;
};

#endif  // SYNCLINE_BACKENDS_NCCL_WORK_H_
