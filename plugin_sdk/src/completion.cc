// completion.cc: see completion.h.
#include "syncline/plugin_sdk/completion.h"

#include <cinttypes>
#include <utility>

#include "syncline/plugin_sdk/error.h"

namespace syncline::backend {

bool OpOutcome::Complete(sl_result_t code, std::string message) {
  uint32_t open = kOpen;
  if (code == SL_OK && message.empty()) {
    // code_ and message_ already say so: only the state changes.
    if (!state_.compare_exchange_strong(open, kDone, std::memory_order_seq_cst)) return false;
  } else {
    if (!state_.compare_exchange_strong(open, kWriting, std::memory_order_acq_rel)) {
      return false;
    }
    code_ = code;
    message_ = std::move(message);
    state_.store(kDone, std::memory_order_seq_cst);
  }
  // A waiter counts itself before it looks at the state (under mu_), and
  // both sides are sequentially consistent: it either sees kDone or is
  // counted here. Taking mu_ orders this wake-up after its look.
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }
  return true;
}

sl_result_t OpOutcome::Report(sl_error_t* err) const {
  // No lock: Complete() wrote code_ and message_ before its release store
  // of done_, and never writes them again, so a reader that has seen done()
  // (the caller's duty) reads them as they stay.
  return SlReport(err, code_, message_);
}

sl_result_t OpOutcome::Test(int* done, sl_error_t* err) const {
  if (!this->done()) {
    *done = 0;
    SlClearError(err);
    return SL_OK;
  }
  *done = 1;
  return Report(err);
}

bool OpOutcome::WaitUntil(Clock::time_point until) const {
  if (done()) return true;
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool ended = true;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto is_done = [this] { return state_.load(std::memory_order_seq_cst) == kDone; };
    if (until == Clock::time_point::max()) {
      cv_.wait(lock, is_done);
    } else {
      ended = cv_.wait_until(lock, until, is_done);
    }
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return ended;
}

OpOutcome::Clock::time_point SlWaitLimit(int64_t timeout_ms) {
  return timeout_ms < 0 ? OpOutcome::Clock::time_point::max()
                        : SlWaitLimit(timeout_ms, OpOutcome::Clock::now());
}

OpOutcome::Clock::time_point SlWaitLimit(int64_t timeout_ms, OpOutcome::Clock::time_point now) {
  return timeout_ms < 0 ? OpOutcome::Clock::time_point::max()
                        : now + std::chrono::milliseconds(timeout_ms);
}

sl_result_t SlWaitTimedOut(sl_error_t* err, const std::string& what, int64_t timeout_ms) {
  return SlSetError(err, SL_ERR_TIMEOUT,
                    "%s: wait timed out after %" PRId64
                    " ms; the op is still running (wait again or abort the communicator)",
                    what.c_str(), timeout_ms);
}

}  // namespace syncline::backend
