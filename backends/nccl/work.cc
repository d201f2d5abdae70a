#include "backends/nccl/work.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <thread>
#include <utility>

#include "syncline/plugin_sdk/error.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::nccl_backend {
namespace {

// request_wait spins this long before it starts sleeping: small ops finish
// within it, and a sleeping waiter would add tens of microseconds to each.
constexpr std::chrono::microseconds kSpinFor(50);
constexpr std::chrono::microseconds kFirstSleep(10);
constexpr std::chrono::microseconds kMaxSleep(1000);

}  // namespace

Request::Request(const sl_op_t& op, std::string where, int device, Event done_event)
    : op_(op),
      where_(std::move(where)),
      device_(device),
      clock_(op.timeout_ms),
      done_event_(std::move(done_event)) {}

std::string Request::Describe() const {
  return backend::SlDescribeOp(op_);
}

bool Request::Complete(sl_result_t code, std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return false;
  done_ = true;
  code_ = code;
  message_ = std::move(message);
  return true;
}

bool Request::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Request::Condemn() {
  std::lock_guard<std::mutex> lock(mu_);
  condemned_ = true;
}

bool Request::Poll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || condemned_) return done_;
  }
  const cudaError_t rc = cudaEventQuery(done_event_.get());
  if (rc == cudaErrorNotReady) return false;
  if (rc == cudaSuccess) {
    // Unless Condemn() ran meanwhile: the event may then have completed
    // because the abort ended the kernel.
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || condemned_) return done_;
    done_ = true;
    code_ = SL_OK;
  } else {
    // A sticky device error (e.g. an illegal address in another kernel):
    // the op cannot be trusted to have finished.
    (void)cudaGetLastError();
    Complete(SL_ERR_INTERNAL,
             "nccl " + Describe() + " on " + where_ +
                 ": CUDA reported an error while the op ran: " + CudaErrorText(rc));
  }
  return true;
}

sl_result_t Request::Result(sl_error_t* err) const {
  std::lock_guard<std::mutex> lock(mu_);
  return backend::SlReport(err, code_, message_);
}

sl_result_t Request::Test(int* done, sl_error_t* err) {
  if (!Poll()) {
    *done = 0;
    backend::SlClearError(err);
    return SL_OK;
  }
  *done = 1;
  return Result(err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point limit = timeout_ms < 0
                                      ? Clock::time_point::max()
                                      : start + std::chrono::milliseconds(timeout_ms);
  std::chrono::microseconds sleep = kFirstSleep;
  for (;;) {
    if (Poll()) return Result(err);
    const Clock::time_point now = Clock::now();
    if (now >= limit) {
      return backend::SlSetError(
          err, SL_ERR_TIMEOUT,
          "nccl %s on %s: wait timed out after %" PRId64
          " ms; the op is still running (wait again, or abort the communicator)",
          Describe().c_str(), where_.c_str(), timeout_ms);
    }
    if (now - start < kSpinFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(sleep, limit - now));
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

sl_result_t Request::StreamWait(void* stream, sl_error_t* err) {
  // An op that already ended needs no wait; one that failed reports it now.
  if (Poll()) return Result(err);
  ScopedDevice on(device_);
  cudaError_t rc = on.status();
  if (rc == cudaSuccess) {
    rc = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_event_.get(), 0);
  }
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return backend::SlSetError(
        err, SL_ERR_INVALID_ARGUMENT,
        "nccl %s on %s: could not make the caller's stream wait for it: %s (is the "
        "stream on cuda:%d?)",
        Describe().c_str(), where_.c_str(), CudaErrorText(rc).c_str(), device_);
  }
  backend::SlClearError(err);
  return SL_OK;
}

}  // namespace syncline::nccl_backend
