#include "backends/gloo/work.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "gloo/transport/unbound_buffer.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::gloo_backend {
Request::Request(const sl_op_t& op) : op_(op), clock_(op.timeout_ms) {}

// Out of line so that work.h need not include Gloo's UnboundBuffer.
Request::~Request() = default;

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
