// advance.cc: one communicator's share of a driver pass: its collectives
// run one at a time in posting order, its point-to-point ops side by side,
// and the failure policy of communicator.h decides what a failure breaks.
//
// Thread safety: everything here runs on the Transport's driver (its
// driver lock held), called from Transport::DriveOnce.
#include <algorithm>
#include <cstdio>

#include "backends/ucx/communicator.h"
#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {

void Communicator::TakeIncoming() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& op : incoming_) {
    if (op->p2p()) {
      p2p_.push_back(std::move(op));
    } else {
      collectives_.push_back(std::move(op));
    }
  }
  incoming_.clear();
}

void Communicator::Advance(Clock::time_point now) {
  // An abort here is a failure for the peers too: tell them, so that their
  // next collective fails at once instead of completing without this rank
  // or waiting for its deadline.
  if (aborted_.load(std::memory_order_relaxed)) NoticeAbort();
  if (notice_->from >= 0 && !driver_broken_) {
    const std::string reason =
        "rank " + std::to_string(notice_->from) +
        " reported that a collective failed there: " + notice_->text;
    const std::string head = collectives_.empty()
                                 ? std::string("ucx collectives")
                                 : "ucx " + collectives_.front()->request().Describe();
    FailCollectives(SL_ERR_PEER, head + " failed on " + Where() + ": " + reason);
  }
  if (notice_->request == nullptr && notice_->from < 0 && size_ > 1 &&
      !stopping_.load()) {
    PostNoticeRecv();
  }
  if (!collectives_.empty()) AdvanceCollectives(now);
  if (!p2p_.empty()) AdvancePointToPoint(now);
}

Clock::time_point Communicator::NextDeadline() const {
  Clock::time_point wake = Clock::time_point::max();
  if (!collectives_.empty()) wake = collectives_.front()->request().deadline();
  for (const auto& op : p2p_) wake = std::min(wake, op->request().deadline());
  return wake;
}

void Communicator::FinishOp(std::unique_ptr<Operation> op) {
  op->request().Complete(SL_OK, "");
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(pending_.begin(), pending_.end(), op->shared_request());
    if (it != pending_.end()) pending_.erase(it);
  }
  transport_->CountFinished();
}

void Communicator::FailOp(std::unique_ptr<Operation> op, sl_result_t code,
                          const std::string& message) {
  op->Cancel(transport_->worker());
  op->request().Complete(code, message);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(pending_.begin(), pending_.end(), op->shared_request());
    if (it != pending_.end()) pending_.erase(it);
  }
  transport_->CountFinished();
  if (op->outstanding() > 0) transport_->AdoptZombie(std::move(op));
}

void Communicator::FailCollectives(sl_result_t code, const std::string& message) {
  if (!driver_broken_ && notice_->from < 0) SendNotice(message);
  driver_broken_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ == SL_OK) {
      broken_code_ = code;
      broken_message_ = message;
      broken_.store(true, std::memory_order_release);
    }
  }
  bool first = true;
  while (!collectives_.empty()) {
    std::unique_ptr<Operation> op = std::move(collectives_.front());
    collectives_.pop_front();
    const std::string text =
        first ? message
              : "ucx " + op->request().Describe() + " not run on " + Where() +
                    ": the communicator is unusable after an earlier failure: " + message;
    FailOp(std::move(op), code, text);
    first = false;
  }
}

void Communicator::AdvanceCollectives(Clock::time_point now) {
  while (!collectives_.empty()) {
    Operation& op = *collectives_.front();
    if (op.request().done()) {  // aborted
      std::unique_ptr<Operation> gone = std::move(collectives_.front());
      collectives_.pop_front();
      FailOp(std::move(gone), SL_ERR_ABORTED, "aborted");
      continue;
    }
    if (driver_broken_) {
      FailCollectives(SL_ERR_ABORTED, "an earlier collective failed");
      return;
    }
    // A dead peer fails the op only if the op still needs it: a peer that
    // finished its part and exited (or closed its endpoints) is harmless.
    const int dead_peer = any_dead_ ? op.OutstandingWithDead(dead_) : -1;
    if (dead_peer >= 0) {
      FailCollectives(SL_ERR_PEER, "ucx " + op.request().Describe() + " failed on " +
                                       Where() + " in " + op.Progress() + ": peer rank " +
                                       std::to_string(dead_peer) +
                                       " died: " + dead_[dead_peer] +
                                       "; still waiting on " + op.Waiting());
      return;
    }
    // Only the front one runs: its timeout counts from when it got here.
    // (A plain load first: the start is set once, and a compare-exchange
    // on every driver pass would be a locked instruction per pass.)
    if (!op.request().clock().started()) op.request().clock().Start(now);
    if (!op.Advance(wire_)) {
      if (now < op.request().deadline()) return;
      const std::string waiting = op.Waiting();
      FailCollectives(SL_ERR_TIMEOUT,
                      "ucx " + op.request().Describe() + " timed out on " + Where() +
                          " after " + op.request().clock().Running() + " (op timeout " +
                          std::to_string(op.request().op().timeout_ms) + " ms) in " +
                          op.Progress() + "; still waiting on " +
                          (waiting.empty() ? "nothing posted" : waiting) +
                          " (a peer is missing, stalled, or issued a different op)");
      return;
    }
    if (op.failed()) {
      FailCollectives(op.code(), "ucx " + op.error() + " on " + Where());
      return;
    }
    std::unique_ptr<Operation> done = std::move(collectives_.front());
    collectives_.pop_front();
    FinishOp(std::move(done));
  }
}

void Communicator::AdvancePointToPoint(Clock::time_point now) {
  for (size_t i = 0; i < p2p_.size();) {
    Operation& op = *p2p_[i];
    const int peer = op.request().op().peer;
    sl_result_t code = SL_OK;
    std::string message;
    const bool finished = op.request().done() || op.Advance(wire_);
    if (op.request().done()) {
      code = SL_ERR_ABORTED;
    } else if (finished && op.failed()) {
      code = op.code();
      message = "ucx " + op.error() + " on " + Where();
    } else if (!finished && any_dead_ && op.OutstandingWithDead(dead_) >= 0) {
      code = SL_ERR_PEER;
      message = "ucx " + op.request().Describe() + " failed on " + Where() +
                ": peer rank " + std::to_string(peer) + " died: " + dead_[peer];
    } else if (!finished && now >= op.request().deadline()) {
      code = SL_ERR_TIMEOUT;
      message = "ucx " + op.request().Describe() + " timed out on " + Where() +
                " after " + op.request().clock().Running() + " (op timeout " +
                std::to_string(op.request().op().timeout_ms) + " ms); rank " +
                std::to_string(peer) + " never posted the matching " +
                (op.request().op().kind == SL_OP_SEND ? "recv" : "send");
    } else if (!finished) {
      ++i;
      continue;
    }
    std::unique_ptr<Operation> taken = std::move(p2p_[i]);
    p2p_.erase(p2p_.begin() + static_cast<long>(i));
    if (code == SL_OK) {
      FinishOp(std::move(taken));
    } else {
      FailOp(std::move(taken), code, message);
    }
  }
}

}  // namespace syncline::ucx_backend
