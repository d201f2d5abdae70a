#include "backends/gloo/work.h"

#include "gloo/transport/unbound_buffer.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::gloo_backend {
Request::Request(const sl_op_t& op) : op_(op), clock_(op.timeout_ms) {}

// Out of line so that work.h need not include Gloo's UnboundBuffer.
Request::~Request() = default;

std::string Request::Describe() const {
  return backend::SlDescribeOp(op_);
}

sl_result_t Request::Test(int* done, sl_error_t* err) const {
  return outcome_.Test(done, err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) const {
  if (!outcome_.WaitUntil(backend::SlWaitLimit(timeout_ms))) {
    return backend::SlWaitTimedOut(err, "gloo " + Describe(), timeout_ms);
  }
  return outcome_.Report(err);
}

void Request::set_buffer(std::unique_ptr<gloo::transport::UnboundBuffer> buffer) {
  buffer_ = std::move(buffer);
}

}  // namespace syncline::gloo_backend
