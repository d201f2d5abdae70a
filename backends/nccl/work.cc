#include "backends/nccl/work.h"

#include <algorithm>
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
  return outcome_.Complete(code, std::move(message));
}

void Request::Condemn() {
  std::lock_guard<std::mutex> lock(mu_);
  condemned_ = true;
}

bool Request::Poll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_.done() || condemned_) return outcome_.done();
  }
  const cudaError_t rc = cudaEventQuery(done_event_.get());
  if (rc == cudaErrorNotReady) return false;
  if (rc == cudaSuccess) {
    // Unless Condemn() ran meanwhile: the event may then have completed
    // because the abort ended the kernel.
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_.done() || condemned_) return outcome_.done();
    outcome_.Complete(SL_OK, "");
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

sl_result_t Request::Test(int* done, sl_error_t* err) {
  Poll();
  return outcome_.Test(done, err);
}

sl_result_t Request::Wait(int64_t timeout_ms, sl_error_t* err) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point limit = backend::SlWaitLimit(timeout_ms);
  std::chrono::microseconds sleep = kFirstSleep;
  for (;;) {
    if (Poll()) return outcome_.Report(err);
    const Clock::time_point now = Clock::now();
    if (now >= limit) {
      return backend::SlWaitTimedOut(err, "nccl " + Describe() + " on " + where_, timeout_ms);
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
  if (Poll()) return outcome_.Report(err);
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
