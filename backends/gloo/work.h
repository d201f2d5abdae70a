// work.h: the request object behind each sl_request_t of the Gloo backend.
//
// A Request holds one posted op and how it ended. It is shared between the
// caller's handle (sl_request_t, freed by request_free) and the
// communicator's queues (the worker thread that runs collectives, the p2p
// thread that completes sends and receives), so freeing a handle never frees
// state an op still uses.
//
// Lifecycle: created by Communicator::Post (pending) -> Complete() exactly
// once, by the thread that ran the op, by Abort (SL_ERR_ABORTED), or by
// validation that fails late. Later Complete() calls are ignored, so an op
// that ends after an abort does not overwrite the ABORTED result. The
// outcome, and request_test's and request_wait's answers from it, are the
// plugin SDK's OpOutcome (completion.h).
//
// Thread safety: every method may be called from any thread.
#ifndef SYNCLINE_BACKENDS_GLOO_WORK_H_
#define SYNCLINE_BACKENDS_GLOO_WORK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/completion.h"
#include "syncline/plugin_sdk/op_clock.h"

namespace gloo::transport {
class UnboundBuffer;
}  // namespace gloo::transport

namespace syncline::gloo_backend {

using Clock = std::chrono::steady_clock;

class Request {
 public:
  // `op` is copied (its buffers are views; the caller keeps them alive).
  // Its deadline counts from clock().Start(): when the worker takes it up
  // (collectives) or at posting (sends and receives); see op_clock.h.
  explicit Request(const sl_op_t& op);
  ~Request();

  const sl_op_t& op() const { return op_; }
  backend::OpClock& clock() { return clock_; }
  const backend::OpClock& clock() const { return clock_; }

  // "allreduce #5 (f32 x 1001, sum)", for messages.
  std::string Describe() const;

  // Completes the request; returns false (and changes nothing) if it had
  // already completed (completion.h).
  bool Complete(sl_result_t code, std::string message) {
    return outcome_.Complete(code, std::move(message));
  }
  bool done() const { return outcome_.done(); }

  // request_test / request_wait: see plugin_abi.h for the contract.
  sl_result_t Test(int* done, sl_error_t* err) const;
  sl_result_t Wait(int64_t timeout_ms, sl_error_t* err) const;

  // Point-to-point only: the Gloo buffer whose completion the p2p thread
  // waits for. Abort() uses it to interrupt that wait.
  void set_buffer(std::unique_ptr<gloo::transport::UnboundBuffer> buffer);
  gloo::transport::UnboundBuffer* buffer() const { return buffer_.get(); }

 private:
  const sl_op_t op_;
  backend::OpClock clock_;
  // Set before the request is shared with the p2p thread, then immutable.
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  backend::OpOutcome outcome_;
};

}  // namespace syncline::gloo_backend

// The opaque handle of the C ABI: one per request_* caller.
struct sl_request {
  std::shared_ptr<syncline::gloo_backend::Request> request;
};

#endif  // SYNCLINE_BACKENDS_GLOO_WORK_H_
