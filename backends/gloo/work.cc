#include "backends/gloo/work.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "backends/common/error.h"
#include "backends/common/reduce.h"
#include "gloo/transport/unbound_buffer.h"

namespace syncline::gloo_backend {
namespace {

// "No timeout" still needs a finite value for Gloo's waits: a week is
// effectively forever for one collective.
constexpr std::chrono::milliseconds kNoTimeout = std::chrono::hours(24 * 7);

Clock::time_point DeadlineOf(const sl_op_t& op, Clock::time_point now) {
  return now +
         (op.timeout_ms > 0 ? std::chrono::milliseconds(op.timeout_ms) : kNoTimeout);
}

}  // namespace

Request::Request(const sl_op_t& op)
    : op_(op), posted_(Clock::now()), deadline_(DeadlineOf(op, posted_)) {}

// Out of line so that work.h need not include Gloo's UnboundBuffer.
Request::~Request() = default;

std::chrono::milliseconds Request::Remaining() const {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

std::string Request::Describe() const {
  return backend::SlDescribeOp(op_);
}

bool Request::Complete(sl_result_t code, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return false;
    done_ = true;
    code_ = code;
    message_ = std::move(message);
  }
  cv_.notify_all();
  return true;
}

bool Request::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

sl_result_t Request::ResultLocked(sl_error_t* err) const {
  return backend::SlReport(err, code_, message_);
}

sl_result_t Request::Test(int* done, sl_error_t* err) const {
  std::lock_guard<std::mutex> lock(mu_);
  *done = done_ ? 1 : 0;
  if (!done_) {
    backend::SlClearError(err);
    return SL_OK;
  }
  return ResultLocked(err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout_ms < 0) {
    cv_.wait(lock, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; });
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_; })) {
    return backend::SlSetError(
        err, SL_ERR_TIMEOUT,
        "gloo %s: wait timed out after %" PRId64
        " ms; the op is still running (wait again or abort the communicator)",
        Describe().c_str(), timeout_ms);
  }
  return ResultLocked(err);
}

void Request::set_buffer(std::unique_ptr<gloo::transport::UnboundBuffer> buffer) {
  buffer_ = std::move(buffer);
}

}  // namespace syncline::gloo_backend
