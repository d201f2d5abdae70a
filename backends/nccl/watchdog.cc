// watchdog.cc: the Communicator's watchdog thread, how it breaks the
// communicator, and how a break reaches the other ranks through the store.
// See communicator.h for the threading model.
#include <cinttypes>
#include <cstdio>
#include <utility>
#include <vector>

#include "backends/nccl/communicator.h"
#include "syncline/plugin_sdk/reduce.h"

namespace syncline::nccl_backend {

void Communicator::WatchdogLoop() {
  // This thread is the plugin's own, so it may keep the device current.
  (void)cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, options_.watchdog_period);
    if (stopping_) break;
    lock.unlock();
    Sweep();
    lock.lock();
  }
}

void Communicator::Sweep() {
  std::shared_ptr<Request> expired;
  std::shared_ptr<Request> oldest;  // blamed for an asynchronous error
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) return;
    // One stream: ops complete in issue order, so stop at the first running.
    while (!pending_.empty() && pending_.front()->Poll()) pending_.pop_front();
    const Clock::time_point now = Clock::now();
    if (!pending_.empty()) {
      oldest = pending_.front();
      // The op before it has finished (seen now, at most one period late):
      // its timeout counts from here, not from its posting.
      oldest->clock().Start(now);
    }
    for (const auto& request : pending_) {
      if (now >= request->deadline()) {
        expired = request;
        break;
      }
    }
  }
  ncclResult_t async = ncclSuccess;
  std::string nccl_state = "NCCL reported no error";
  {
    // A Post holding the lock is inside NCCL and polls the state itself;
    // the next sweep will look again.
    std::unique_lock<std::mutex> issue(issue_mu_, std::try_to_lock);
    if (issue.owns_lock() && comm_) {
      if (ncclCommGetAsyncError(comm_.get(), &async) != ncclSuccess) {
        async = ncclInternalError;
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        nccl_state = NcclErrorText(async, comm_.get());
      }
    }
  }
  if (expired != nullptr && expired->Poll()) expired.reset();  // just finished
  BreakReason reason;
  if (expired != nullptr) {
    char head[320];
    std::snprintf(head, sizeof(head), "after %s (op timeout %" PRId64 " ms; %s)",
                  expired->clock().Running().c_str(), expired->op().timeout_ms,
                  nccl_state.c_str());
    reason.code = SL_ERR_ABORTED;
    reason.cause =
        expired->Describe() + " timed out " + head + " and the communicator was aborted";
    reason.culprit = expired.get();
    reason.culprit_code = SL_ERR_TIMEOUT;
    reason.culprit_message =
        "nccl " + expired->Describe() + " timed out on " + where_ + " " + head +
        ". The communicator was aborted so that later ops fail instead of hanging. A "
        "peer died, stalled, or issued a different op: check the other ranks' logs "
        "for their first error";
  } else if (async != ncclSuccess && async != ncclInProgress) {
    reason.code = ToSlResult(async);
    reason.cause = "NCCL reported an asynchronous error: " + nccl_state +
                   "; the communicator was aborted";
  } else {
    return;
  }
  reason.publish = true;  // a local fault: the other ranks must hear of it
  const Request* blamed = expired != nullptr ? expired.get() : oldest.get();
  if (blamed != nullptr) reason.op = &blamed->op();
  // Nobody may be waiting on the op yet; leave a trace in the rank's log.
  std::fprintf(
      stderr, "syncline nccl: %s: %s\n", where_.c_str(),
      reason.culprit != nullptr ? reason.culprit_message.c_str() : reason.cause.c_str());
  Break(std::move(reason));
}

void Communicator::Break(BreakReason reason) {
  std::deque<std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) return;
    broken_code_ = reason.code;
    broken_message_ = reason.cause;
    pending.swap(pending_);
    for (const auto& request : pending) {
      if (!request->Poll()) request->Condemn();  // finished ones keep success
    }
  }
  breaking_ = true;  // a Post polling an in-progress launch lets go of issue_mu_
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    ScopedDevice on(device_);
    comm_.Abort();
  }
  if (reason.publish && abort_channel_ != nullptr) {
    const std::string told = PublishAbort(reason);
    reason.cause += told;
    reason.culprit_message += told;
  }
  for (const auto& request : pending) {
    if (request.get() == reason.culprit) {
      request->Complete(reason.culprit_code, reason.culprit_message);
    } else {
      request->Complete(reason.code, "nccl " + request->Describe() + " on " + where_ +
                                         ": did not complete: " + reason.cause);
    }
  }
}

std::string Communicator::PublishAbort(const BreakReason& reason) {
  AbortRecord mine;
  mine.rank = rank_;
  if (reason.op != nullptr) {
    mine.op = backend::SlOpKindName(reason.op->kind);
    mine.seq = reason.op->seq;
  }
  mine.reason = reason.cause;
  AbortRecord first;
  std::string error;
  if (!abort_channel_->Publish(mine, &first, &error)) {
    std::fprintf(stderr, "syncline nccl: %s: %s\n", where_.c_str(), error.c_str());
    return " (the other ranks could not be told through the store: " + error + ")";
  }
  if (first.rank == rank_) return "";
  return " (" + first.Describe() + ")";
}

void Communicator::OnRemoteAbort(const AbortRecord& first) {
  BreakReason reason = BreakReason::Of(
      SL_ERR_PEER, first.Describe() + "; so this rank aborted its communicator too");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) return;
  }
  std::fprintf(stderr, "syncline nccl: %s: %s\n", where_.c_str(), reason.cause.c_str());
  Break(std::move(reason));
}

}  // namespace syncline::nccl_backend
