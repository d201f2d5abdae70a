// progress.cc: the Communicator's progress engine: who drives UCP and how
// waiting threads sleep. See communicator.h for the model and trade-offs.
#include <poll.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "backends/ucx/communicator.h"
#include "backends/ucx/tag.h"

namespace syncline::ucx_backend {
namespace {

// A driver sleeps at most this long in poll() before re-checking deadlines.
constexpr std::chrono::milliseconds kMaxSleep(10);
// A polling driver starts yielding its core after this long without
// events. A small message's round trip (~2 us) never reaches it, so
// latency is untouched when the ranks have a core each; when the scheduler
// puts two ranks on one core, the waiting one must give way for the answer
// to come (measured: 8-byte allreduce ~47 us at 20 us, ~200-400 us at
// 200 us, in that placement).
constexpr std::chrono::microseconds kYieldAfter(20);
// How often a busy driver looks at same-host peers' pidfds.
constexpr std::chrono::milliseconds kPeerCheckInterval(10);
// After this long without ops the progress thread stops its periodic
// checks and sleeps until the next post.
constexpr std::chrono::milliseconds kLinger(200);

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

std::string Seconds(Clock::time_point since) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s",
                std::chrono::duration<double>(Clock::now() - since).count());
  return text;
}

}  // namespace

void Communicator::NotifyWaiters() {
  if (waiters_.load() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void Communicator::MarkDead(int rank, const std::string& why) {
  if (!dead_[rank].empty()) return;
  dead_[rank] = why;
  any_dead_ = true;
}

void Communicator::CheckPeers(bool force) {
  const auto now = Clock::now();
  if (!force && now - last_peer_check_ < kPeerCheckInterval) return;
  last_peer_check_ = now;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || !dead_[r].empty() || peers_[r].machine != peers_[rank_].machine) {
      continue;
    }
    bool gone = false;
    if (pidfds_[r] >= 0) {
      pollfd fd{pidfds_[r], POLLIN, 0};
      gone = poll(&fd, 1, 0) > 0;
    } else {
      gone = kill(peers_[r].pid, 0) != 0 && errno == ESRCH;
    }
    if (gone) {
      MarkDead(r, "its process (pid " + std::to_string(peers_[r].pid) + " on " +
                      peers_[r].host + ") exited");
    }
  }
}

void Communicator::FinishOp(std::unique_ptr<Operation> op) {
  op->request().Complete(SL_OK, "");
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(pending_.begin(), pending_.end(), op->shared_request());
    if (it != pending_.end()) pending_.erase(it);
  }
  unfinished_.fetch_sub(1);
}

void Communicator::FailOp(std::unique_ptr<Operation> op, sl_result_t code,
                          const std::string& message) {
  op->Cancel(worker_.get());
  op->request().Complete(code, message);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(pending_.begin(), pending_.end(), op->shared_request());
    if (it != pending_.end()) pending_.erase(it);
  }
  unfinished_.fetch_sub(1);
  if (op->outstanding() > 0) zombies_.push_back(std::move(op));
}

void Communicator::FailCollectives(sl_result_t code, const std::string& message) {
  if (!driver_broken_ && notice_from_ < 0) SendNotice(message);
  driver_broken_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ == SL_OK) {
      broken_code_ = code;
      broken_message_ = message;
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
                                       std::to_string(dead_peer) + " died: " +
                                       dead_[dead_peer] + "; still waiting on " +
                                       op.Waiting());
      return;
    }
    if (!op.Advance(wire_)) {
      if (now < op.request().deadline()) return;  // only the front one runs
      const std::string waiting = op.Waiting();
      FailCollectives(SL_ERR_TIMEOUT,
                      "ucx " + op.request().Describe() + " timed out on " + Where() +
                          " after " + Seconds(op.request().posted()) + " (op timeout " +
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
      message = "ucx " + op.request().Describe() + " failed on " + Where() + ": peer rank " +
                std::to_string(peer) + " died: " + dead_[peer];
    } else if (!finished && now >= op.request().deadline()) {
      code = SL_ERR_TIMEOUT;
      message = "ucx " + op.request().Describe() + " timed out on " + Where() + " after " +
                Seconds(op.request().posted()) + " (op timeout " +
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

bool Communicator::DriveOnce() {
  if (has_incoming_.load(std::memory_order_relaxed) && has_incoming_.exchange(false)) {
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
  bool did = false;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_.get()) != 0; ++i) did = true;
  const auto now = Clock::now();
  if (unfinished_.load(std::memory_order_relaxed) > 0) CheckPeers(false);
  // An abort here is a failure for the peers too: tell them, so that their
  // next collective fails at once instead of completing without this rank
  // or waiting for its deadline.
  if (aborted_.load(std::memory_order_relaxed)) NoticeAbort();
  if (notice_from_ >= 0 && !driver_broken_) {
    const std::string reason = "rank " + std::to_string(notice_from_) +
                               " reported that a collective failed there: " + notice_text_;
    const std::string head =
        collectives_.empty() ? std::string("ucx collectives")
                             : "ucx " + collectives_.front()->request().Describe();
    FailCollectives(SL_ERR_PEER, head + " failed on " + Where() + ": " + reason);
  }
  if (notice_request_ == nullptr && notice_from_ < 0 && size_ > 1) PostNoticeRecv();
  AdvanceCollectives(now);
  AdvancePointToPoint(now);
  zombies_.erase(std::remove_if(zombies_.begin(), zombies_.end(),
                                [](const std::unique_ptr<Operation>& op) {
                                  return op->outstanding() == 0;
                                }),
                 zombies_.end());
  last_drive_ns_.store(NowNs(), std::memory_order_relaxed);
  return did;
}

void Communicator::BlockOnWorker(Clock::time_point until) {
  if (ucp_worker_arm(worker_.get()) != UCS_OK) return;  // events pending
  driver_blocked_.store(true);
  // Re-check after announcing: a poster (or a new waiter, for the progress
  // thread to hand over to) that saw driver_blocked_ false has already set
  // has_incoming_ (or waiters_).
  if (has_incoming_.load() || waiters_.load() > 0 || aborted_.load() || stopping_.load()) {
    driver_blocked_.store(false);
    return;
  }
  auto wake = std::min(until, Clock::now() + kMaxSleep);
  if (!collectives_.empty()) wake = std::min(wake, collectives_.front()->request().deadline());
  for (const auto& op : p2p_) wake = std::min(wake, op->request().deadline());
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(wake - Clock::now()).count();
  const int timeout_ms = static_cast<int>(std::max<int64_t>(0, (left + 999) / 1000));
  std::vector<pollfd> fds;
  fds.push_back({worker_.event_fd(), POLLIN, 0});
  for (int r = 0; r < size_; ++r) {
    if (pidfds_[r] >= 0 && dead_[r].empty()) fds.push_back({pidfds_[r], POLLIN, 0});
  }
  poll(fds.data(), fds.size(), timeout_ms);
  driver_blocked_.store(false);
  if (fds.size() > 1) CheckPeers(/*force=*/true);
}

template <typename Done>
void Communicator::DriveUntil(Done done, Clock::time_point until) {
  const auto spin = std::chrono::microseconds(options_.busy_poll_us);
  auto last_event = Clock::now();
  while (!done()) {
    const bool did = DriveOnce();
    const auto now = Clock::now();
    if (did) last_event = now;
    if (done() || now >= until) return;
    if (now - last_event >= spin) {
      BlockOnWorker(until);
      last_event = Clock::now();
    } else if (now - last_event >= kYieldAfter) {
      // A long wait usually means the peer needs CPU (a rendezvous copy,
      // or it shares this core): let it run, but keep polling.
      sched_yield();
    }
  }
}

bool Communicator::WaitFor(const Request& request, Clock::time_point until) {
  while (!request.done()) {
    const auto now = Clock::now();
    if (now >= until) return false;
    if (driver_mu_.try_lock()) {
      DriveUntil([&] { return request.done(); }, until);
      driver_mu_.unlock();
      NotifyWaiters();  // another waiter may take over driving
      continue;
    }
    // Someone else drives: sleep until a request completes or it leaves.
    waiters_.fetch_add(1);
    if (driver_blocked_.load()) ucp_worker_signal(worker_.get());
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, std::min(until, now + std::chrono::milliseconds(2)),
                     [&] { return request.done(); });
    }
    waiters_.fetch_sub(1);
  }
  return true;
}

void Communicator::TryProgress() {
  if (!driver_mu_.try_lock()) return;
  DriveOnce();
  driver_mu_.unlock();
  NotifyWaiters();
}

void Communicator::ProgressLoop() {
  const auto delay = std::chrono::microseconds(options_.async_progress_delay_us);
  const int64_t delay_ns = options_.async_progress_delay_us * 1000;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_.load()) {
    const int64_t idle_ns = NowNs() - last_drive_ns_.load();
    if (unfinished_.load() == 0) {
      if (idle_ns > std::chrono::nanoseconds(kLinger).count()) {
        thread_idle_ = true;
        thread_cv_.wait(lock, [&] { return stopping_.load() || unfinished_.load() > 0; });
        thread_idle_ = false;
      } else {
        thread_cv_.wait_for(lock, std::max(delay, std::chrono::microseconds(1000)));
      }
      continue;
    }
    if (idle_ns < delay_ns || waiters_.load() > 0) {
      thread_cv_.wait_for(lock, delay);
      continue;
    }
    lock.unlock();
    if (driver_mu_.try_lock()) {
      // Drive until nothing is left, or hand over to a waiter at once.
      DriveUntil(
          [&] {
            return unfinished_.load() == 0 || waiters_.load() > 0 || stopping_.load() ||
                   aborted_.load();
          },
          Clock::time_point::max());
      if (aborted_.load()) DriveOnce();  // drop the aborted ops
      driver_mu_.unlock();
      NotifyWaiters();
    }
    lock.lock();
  }
}

}  // namespace syncline::ucx_backend
