// work.h: the handle of an asynchronous operation.
//
// Every op on a Communicator returns a Work. The op runs in the background;
// the Work reports when it is done and how it ended.
//
// Contract:
//  - Wait(timeout) blocks until the op completes or `timeout` passes. It
//    returns the op's status: OK, or an error naming the op, its sequence
//    number, the rank and what went wrong. If the wait runs out before the op
//    ends, it returns DeadlineExceeded and the op keeps running: Wait again or
//    abort the communicator. The op's own deadline (OpOptions::timeout) still
//    applies, so an op never runs forever.
//  - WaitStream(stream) is the GPU form of Wait, what PyTorch's
//    `work.wait()` does for NCCL: it makes the CUDA stream `stream` wait for
//    the op on the device and returns without blocking the host. Work queued
//    on `stream` afterwards sees the op's result. It needs a backend that
//    runs on CUDA streams (nccl); on every other backend it is Wait() with no
//    timeout, so callers can use it uniformly.
//  - Test() never blocks; true when the op has completed (successfully or not).
//  - status() is the op's final status once Test() is true, and before that
//    absl::UnknownError("allreduce #7 (...) is still running"): kUnknown is
//    never the status of an op that ended (IsStillRunning() below), while a
//    dead peer is kUnavailable. How a backend's results map onto codes:
//    plugin_abi.h, sl_result_t.
//  - Destroying a Work does not cancel the op. The caller's buffers must stay
//    valid until the op has completed.
//  - A Work may outlive its Communicator, and may be waited on after the
//    Communicator is destroyed. An op that had completed keeps its status.
//    An op still running when the Communicator is destroyed is aborted
//    (as by Communicator::Abort(), so the peers see this rank leave): Wait(),
//    Test() and status() then report kAborted, "allreduce #7 (...) failed: the
//    communicator was destroyed before this work finished; wait for every
//    Work before destroying its Communicator". The backend's resources are
//    released when the Communicator and all of its Works are gone. Wait for
//    every Work first to get the op's own result.
// Thread safety: one Work may be used from one thread at a time; its
// Communicator may be destroyed on another thread meanwhile (a Wait() there
// returns at once with the error above).
//
// Example:
//   SL_ASSIGN_OR_RETURN(auto work, comm->Allreduce(View(grad), {}));
//   SL_RETURN_IF_ERROR(work->Wait(absl::Seconds(30)));
#ifndef SYNCLINE_WORK_H_
#define SYNCLINE_WORK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

class Work {
 public:
  virtual ~Work() = default;

  // Blocks until completion or `timeout`; see the contract above.
  virtual absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) = 0;

  // WaitStream()
  //
  // Makes `stream` (a cudaStream_t on the op's device; nullptr means that
  // device's legacy default stream) wait for the op's completion, without
  // blocking the host; see the contract above. Returns the op's status if
  // it has already ended, OK once the device-side wait is queued, and an
  // error (the op unaffected) if `stream` cannot wait. An op that fails
  // after this call returns reports it through Wait(), Test() and status(),
  // and every later op on the communicator fails; the stream itself then
  // runs on (the backend aborts the op's kernels, so the result is not to be
  // used). The op's memory may be released in stream order after this call:
  // work on `stream` runs after the op.
  //
  // On backends that run on the host (gloo, ucx) this is Wait(): it blocks
  // until the op completes, and `stream` is not used.
  //
  // Example (PyTorch-style, on the current stream):
  //   SL_ASSIGN_OR_RETURN(auto work, comm->Allreduce(grad_view, {}));
  //   SL_RETURN_IF_ERROR(work->WaitStream(current_stream));
  //   launch_optimizer_step(current_stream);  // reads the reduced gradients
  virtual absl::Status WaitStream(void* stream) {
    (void)stream;
    return Wait();
  }

  // True once the op has completed. Never blocks.
  virtual bool Test() = 0;

  // The final status after completion; StillRunningError() while running.
  virtual absl::Status status() = 0;

  // Sequence number of the op on its communicator (1 for the first op).
  virtual uint64_t seq() const = 0;

  // Human-readable description, e.g. "allreduce #17 (f32 x 1024, sum)".
  virtual std::string Describe() const = 0;
};

// StillRunningError() / IsStillRunning()
//
// What Work::status() returns for an op that has not ended, and the test for
// it. A Work implementation returns StillRunningError(Describe()).
//
// Example:
//   absl::Status s = work->status();
//   if (syncline::IsStillRunning(s)) { /* come back later */ }
//   else if (!s.ok()) { /* the op failed: s says how */ }
inline absl::Status StillRunningError(absl::string_view op) {
  return absl::UnknownError(absl::StrCat(op, " is still running"));
}
inline bool IsStillRunning(const absl::Status& status) { return absl::IsUnknown(status); }

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_WORK_H_
