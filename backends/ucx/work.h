// work.h: the request object behind each sl_request_t of the UCX backend.
//
// A Request records one posted op and how it ended. The caller's handle
// (sl_request_t) and the communicator's Operation both hold it, so freeing
// the handle never frees state a running op still touches.
//
// Lifecycle: created pending by Communicator::Post -> Complete() exactly
// once (by the driver when the schedule ends or fails, by a deadline, or by
// Abort with SL_ERR_ABORTED). Later Complete() calls are ignored.
//
// Progress: Test() and Wait() do not just look at a flag. They ask the
// communicator to drive progress (communicator.h explains who drives when),
// so an op advances whenever somebody waits for it.
//
// Thread safety: every method may be called from any thread. The
// communicator must outlive its requests' Test/Wait calls (the ABI requires
// requests to be freed before comm_destroy).
#ifndef SYNCLINE_BACKENDS_UCX_WORK_H_
#define SYNCLINE_BACKENDS_UCX_WORK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/completion.h"
#include "syncline/plugin_sdk/op_clock.h"

namespace syncline::ucx_backend {

using Clock = std::chrono::steady_clock;
class Transport;

class Request {
 public:
  // `op` is copied (its buffers are views the caller keeps alive). Its
  // deadline counts from clock().Start(): at posting for sends and receives,
  // which run side by side; when it reaches the front of the collectives'
  // queue for a collective (op_clock.h). `transport` drives it (transport.h). A non-empty
  // `label` replaces Describe()'s text (the backend's own ops, e.g. Split's
  // allgather, which has no sequence number of the core's).
  Request(Transport* transport, const sl_op_t& op, int group_size, std::string label = "");

  const sl_op_t& op() const { return op_; }
  int group_size() const { return group_size_; }
  backend::OpClock& clock() { return clock_; }
  const backend::OpClock& clock() const { return clock_; }
  // time_point::max() until the op has started (see clock()).
  Clock::time_point deadline() const { return clock_.deadline(); }

  // "allreduce #5 (f32 x 1001, sum)", for messages.
  std::string Describe() const;

  // Completes the request; false (and no change) if it already was.
  bool Complete(sl_result_t code, std::string message);
  // Lock-free, for the waiters' polling loops.
  bool done() const { return outcome_.done(); }

  // request_test / request_wait: see plugin_abi.h for the contract.
  sl_result_t Test(int* done, sl_error_t* err);
  sl_result_t Wait(int64_t timeout_ms, sl_error_t* err);

  // The result once done(); fills `err` with the message on failure.
  sl_result_t Result(sl_error_t* err) const { return outcome_.Report(err); }

 private:
  Transport* const transport_;
  const sl_op_t op_;
  const std::string label_;
  const int group_size_;
  backend::OpClock clock_;
  backend::OpOutcome outcome_;
};

}  // namespace syncline::ucx_backend

// The opaque handle of the C ABI: one per request_* caller.
struct sl_request {
  std::shared_ptr<syncline::ucx_backend::Request> request;
};

#endif  // SYNCLINE_BACKENDS_UCX_WORK_H_
