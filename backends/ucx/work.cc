#include "backends/ucx/work.h"

#include <utility>

#include "backends/ucx/transport.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::ucx_backend {
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
  if (!outcome_.Complete(code, std::move(message))) return false;
  transport_->NotifyWaiters();
  return true;
}

sl_result_t Request::Test(int* done, sl_error_t* err) {
  if (!this->done()) transport_->TryProgress();
  return outcome_.Test(done, err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) {
  if (!transport_->WaitFor(*this, backend::SlWaitLimit(timeout_ms))) {
    return backend::SlWaitTimedOut(err, "ucx " + Describe(), timeout_ms);
  }
  return Result(err);
}

}  // namespace syncline::ucx_backend
