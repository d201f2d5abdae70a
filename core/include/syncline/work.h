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
//  - Test() never blocks; true when the op has completed (successfully or not).
//  - status() is the op's final status once Test() is true, and
//    absl::UnavailableError("still running") before.
//  - Destroying a Work does not cancel the op. The caller's buffers must stay
//    valid until the op has completed.
// Thread safety: one Work may be used from one thread at a time.
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
#include "absl/time/time.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

class Work {
 public:
  virtual ~Work() = default;

  // Blocks until completion or `timeout`; see the contract above.
  virtual absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) = 0;

  // True once the op has completed. Never blocks.
  virtual bool Test() = 0;

  // The final status after completion; UnavailableError while running.
  virtual absl::Status status() = 0;

  // Sequence number of the op on its communicator (1 for the first op).
  virtual uint64_t seq() const = 0;

  // Human-readable description, e.g. "allreduce #17 (f32 x 1024, sum)".
  virtual std::string Describe() const = 0;
};

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_WORK_H_
