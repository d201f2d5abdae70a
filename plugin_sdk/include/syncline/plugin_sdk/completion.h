// completion.h: the outcome of one posted op, written once and read by
// request_test and request_wait, the same in every backend.
//
// A backend's request pairs the op (and its OpClock) with an OpOutcome. The
// thread that ends the op (a worker, a progress loop, an abort) calls
// Complete() once; later calls change nothing, so an abort racing the op's
// own end is harmless. Test() gives request_test's answer; WaitUntil()
// blocks a host thread until the outcome is in or a time passes, for a
// backend whose ops end on threads of their own (Gloo); a backend that
// drives progress itself while waiting (UCX, NCCL) polls done() instead.
// SlWaitTimedOut() is the one wording of a wait that ran out.
//
// Thread safety: every member may be called from any thread.
//
// Example:
//   sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) const {
//     if (!outcome_.WaitUntil(SlWaitLimit(timeout_ms)))
//       return SlWaitTimedOut(err, "gloo " + Describe(), timeout_ms);
//     return outcome_.Report(err);
//   }
#ifndef SYNCLINE_PLUGIN_SDK_COMPLETION_H_
#define SYNCLINE_PLUGIN_SDK_COMPLETION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "syncline/plugin_abi.h"

namespace syncline::backend {

// OpOutcome
//
// Done or not, and once done, the result code and message ("" on success).
class OpOutcome {
 public:
  using Clock = std::chrono::steady_clock;

  // Records the outcome and wakes WaitUntil(); false (and no change) if
  // it was already recorded.
  bool Complete(sl_result_t code, std::string message);

  // Lock-free, for polling loops.
  bool done() const { return state_.load(std::memory_order_acquire) == kDone; }

  // The outcome through the ABI (SlReport): `err` cleared on success, the
  // message otherwise. Only once done(); takes no lock.
  sl_result_t Report(sl_error_t* err) const;

  // request_test's answer: *done, and the outcome once done, SL_OK with
  // `err` cleared before.
  sl_result_t Test(int* done, sl_error_t* err) const;

  // Blocks until Complete() or `until`; true when done.
  bool WaitUntil(Clock::time_point until) const;

 private:
  // kOpen, then kDone; a Complete() with something to write (an error, a
  // message) holds kWriting while it writes code_ and message_.
  static constexpr uint32_t kOpen = 0, kWriting = 1, kDone = 2;
  // WaitUntil() sleeps on cv_ under mu_. Complete() takes neither unless a
  // waiter counted itself in waiters_ (an op's own end, polled by its
  // waiter, is one compare-exchange: a lock pair cost twice that).
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::atomic<int> waiters_{0};
  std::atomic<uint32_t> state_{kOpen};
  // Written once, before state_ becomes kDone; read without a lock once
  // done() is true, since nothing writes them again. A success without a
  // message leaves them as they start.
  sl_result_t code_ = SL_OK;
  std::string message_;
};

// SlWaitLimit()
//
// When a request_wait with `timeout_ms` (< 0: forever) gives up:
// time_point::max() for forever. The second form counts from `now`, for a
// caller that has just read the clock anyway.
OpOutcome::Clock::time_point SlWaitLimit(int64_t timeout_ms);
OpOutcome::Clock::time_point SlWaitLimit(int64_t timeout_ms, OpOutcome::Clock::time_point now);

// SlWaitTimedOut()
//
// SL_ERR_TIMEOUT with the one message for a wait (not the op) that ran out:
// "<what>: wait timed out after <ms> ms; the op is still running (wait
// again or abort the communicator)". `what` names the backend and the op,
// e.g. "gloo allreduce #5 (f32 x 1001, sum)".
sl_result_t SlWaitTimedOut(sl_error_t* err, const std::string& what, int64_t timeout_ms);

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_COMPLETION_H_
