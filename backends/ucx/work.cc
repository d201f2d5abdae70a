#include "backends/ucx/work.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "backends/ucx/transport.h"
#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::ucx_backend {
namespace {

}  // namespace

Request::Request(Transport* transport, const sl_op_t& op, int group_size,
                 std::string label)
    : transport_(transport),
      op_(op),
      label_(std::move(label)),
      group_size_(group_size),
      clock_(op.timeout_ms) {
  if (op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) clock_.Start(clock_.posted());
}

std::string Request::Describe() const {
  if (!label_.empty()) return label_;
  return backend::SlDescribeOp(op_);
}

bool Request::Complete(sl_result_t code, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return false;
    code_ = code;
    message_ = std::move(message);
    done_.store(true, std::memory_order_release);
  }
  transport_->NotifyWaiters();
  return true;
}

sl_result_t Request::Result(sl_error_t* err) const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend::SlReport(err, code_, message_);
}

sl_result_t Request::Test(int* done, sl_error_t* err) {
  if (!this->done()) transport_->TryProgress();
  *done = this->done() ? 1 : 0;
  if (*done == 0) {
    backend::SlClearError(err);
    return SL_OK;
  }
  return Result(err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) {
  const Clock::time_point until =
      timeout_ms < 0 ? Clock::time_point::max()
                     : Clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!transport_->WaitFor(*this, until)) {
    return backend::SlSetError(
        err, SL_ERR_TIMEOUT,
        "ucx %s: wait timed out after %" PRId64
        " ms; the op is still running (wait again or abort the communicator)",
        Describe().c_str(), timeout_ms);
  }
  return Result(err);
}

}  // namespace syncline::ucx_backend
