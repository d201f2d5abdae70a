// ops.h: one sl_op_t executed with Gloo's collective functions.
//
// The communicator's worker thread calls RunCollective() for each op in
// sequence order; the posting thread calls StartPointToPoint() for sends and
// receives, which Gloo completes in the background. Every Gloo call gets the
// op's remaining time as its timeout and the op's sequence number as its tag,
// so consecutive ops use distinct Gloo slots and a late message from op N can
// never be taken for op N+1.
//
// Reductions go through Gloo's custom reduce-function hook with the kernels
// of the plugin SDK, which is what makes f16, bf16 and every integer type
// work; AVG is a SUM followed by one division of the final result.
//
// Errors: these functions throw whatever Gloo throws (gloo::IoException on a
// timeout or a broken connection, gloo::EnforceNotMet on a bug); the caller
// translates. Arguments must already be validated (see ValidateOp).
#ifndef SYNCLINE_BACKENDS_GLOO_OPS_H_
#define SYNCLINE_BACKENDS_GLOO_OPS_H_

#include <chrono>
#include <memory>
#include <string>

#include "syncline/plugin_abi.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace syncline::gloo_backend {

// ValidateOp()
//
// The plugin SDK's SlValidateOp (validate.h) with Gloo's rules: CPU
// buffers only. Returns SL_OK or an error code with `*message` saying what
// is wrong.
sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, std::string* message);

// RunCollective()
//
// Runs a collective (not SEND/RECV) to completion. Blocking. Sizes of zero
// complete at once without communication.
void RunCollective(const std::shared_ptr<::gloo::Context>& context, const sl_op_t& op,
                   std::chrono::milliseconds timeout);

// StartPointToPoint()
//
// Posts a SEND or RECV with Gloo and returns the buffer to wait on
// (waitSend/waitRecv). Never blocks on the peer. Returns nullptr for a zero
// count: there is nothing to transfer and the op is complete.
std::unique_ptr<::gloo::transport::UnboundBuffer> StartPointToPoint(
    const std::shared_ptr<::gloo::Context>& context, const sl_op_t& op);

}  // namespace syncline::gloo_backend

#endif  // SYNCLINE_BACKENDS_GLOO_OPS_H_
