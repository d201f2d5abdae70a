// progress.cc: the Transport's progress engine: who drives UCP and how
// waiting threads sleep. See communicator.h for the model and trade-offs,
// and transport.h for why progress is per worker, not per communicator.
#include <poll.h>
#include <sched.h>

#include <algorithm>

#include "backends/ucx/communicator.h"
#include "backends/ucx/transport.h"

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
// After this long without ops the progress thread stops its periodic
// checks and sleeps until the next post.
constexpr std::chrono::milliseconds kLinger(200);

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Transport::NotifyWaiters() {
  if (waiters_.load() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void Transport::OnPosted() {
  has_incoming_.store(true);
  if (thread_idle_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    thread_cv_.notify_one();
  }
  if (driver_blocked_.load()) ucp_worker_signal(worker_.get());
  TryProgress();
}

void Transport::Wake() {
  ucp_worker_signal(worker_.get());
  std::lock_guard<std::mutex> lock(mu_);
  thread_cv_.notify_all();
  cv_.notify_all();
}

bool Transport::DriveOnce(Clock::time_point* now_out) {
  if (has_incoming_.load(std::memory_order_relaxed) && has_incoming_.exchange(false)) {
    for (Communicator* comm : comms_) comm->TakeIncoming();
  }
  // After taking the ops: the posting thread queued their peers before it
  // queued them (Transport::Prepare), so none is posted to a null endpoint.
  ConnectPending();
  bool did = false;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_.get()) != 0; ++i) did = true;
  const auto now = Clock::now();
  if (unfinished_.load(std::memory_order_relaxed) > 0) CheckPeers(false, now);
  for (Communicator* comm : comms_) comm->Advance(now);
  if (!zombies_.empty()) {
    zombies_.erase(std::remove_if(zombies_.begin(), zombies_.end(),
                                  [](const std::unique_ptr<Operation>& op) {
                                    return op->outstanding() == 0;
                                  }),
                   zombies_.end());
  }
  if (!notice_zombies_.empty()) {
    notice_zombies_.erase(std::remove_if(notice_zombies_.begin(), notice_zombies_.end(),
                                         [](const std::unique_ptr<NoticeSlot>& slot) {
                                           return slot->request == nullptr;
                                         }),
                          notice_zombies_.end());
  }
  // The pass's own reading: a clock read costs ~20 ns, as much as the rest
  // of an idle pass (bench/README.md, "The 8-byte path").
  last_drive_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
      std::memory_order_relaxed);
  if (now_out != nullptr) *now_out = now;
  return did;
}

bool Transport::BlockOnWorker(Clock::time_point until) {
  if (ucp_worker_arm(worker_.get()) != UCS_OK) return true;  // events pending
  driver_blocked_.store(true);
  // Re-check after announcing: a poster (or a new waiter, for the progress
  // thread to hand over to) that saw driver_blocked_ false has already set
  // has_incoming_ (or waiters_). An abort signals the worker, which makes
  // the arm above or the poll below return at once.
  if (has_incoming_.load() || waiters_.load() > 0 || stopping_.load()) {
    driver_blocked_.store(false);
    return true;
  }
  auto wake = std::min(until, Clock::now() + kMaxSleep);
  for (const Communicator* comm : comms_) wake = std::min(wake, comm->NextDeadline());
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(wake - Clock::now()).count();
  const int timeout_ms = static_cast<int>(std::max<int64_t>(0, (left + 999) / 1000));
  std::vector<pollfd> fds;
  fds.push_back({worker_.event_fd(), POLLIN, 0});
  for (int r = 0; r < size_; ++r) {
    if (pidfds_[r] >= 0 && dead_[r].empty()) fds.push_back({pidfds_[r], POLLIN, 0});
  }
  const int woken = poll(fds.data(), fds.size(), timeout_ms);
  driver_blocked_.store(false);
  if (fds.size() > 1) CheckPeers(/*force=*/true);
  return woken != 0;
}

template <typename Done>
void Transport::DriveUntil(Done done, Clock::time_point until) {
  const auto spin = std::chrono::microseconds(options_.busy_poll_us);
  // The wait counts from the first pass's own clock reading (a read costs
  // ~30 ns, bench/README.md "The 8-byte path").
  auto last_event = Clock::time_point::min();
  while (!done()) {
    Clock::time_point now;
    const bool did = DriveOnce(&now);
    if (did || last_event == Clock::time_point::min()) last_event = now;
    if (done() || now >= until) return;
    if (now - last_event >= spin) {
      // Woken by the worker (an event, a post, a waiter), poll again for
      // busy_poll_us: the answers follow. A sleep that simply ran out
      // (kMaxSleep, a deadline check) sleeps again unless the pass finds an
      // event: it went back to polling for busy_poll_us each time, 1 ms in
      // every 10 ms by default (a tenth of a core while a peer was late).
      if (BlockOnWorker(until)) last_event = Clock::now();
    } else if (now - last_event >= kYieldAfter) {
      // A long wait usually means the peer needs CPU (a rendezvous copy,
      // or it shares this core): let it run, but keep polling.
      sched_yield();
    }
  }
}

bool Transport::WaitFor(const Request& request, Clock::time_point until) {
  while (!request.done()) {
    // A wait without a limit (the usual one) reads no clock here: the
    // driver's passes do.
    if (until != Clock::time_point::max() && Clock::now() >= until) return false;
    if (driver_mu_.try_lock()) {
      DriveUntil([&] { return request.done(); }, until);
      driver_mu_.unlock();
      NotifyWaiters();  // another waiter may take over driving
      continue;
    }
    // Someone else drives (it advances this request's communicator too):
    // sleep until a request completes or it leaves.
    waiters_.fetch_add(1);
    if (driver_blocked_.load()) ucp_worker_signal(worker_.get());
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, std::min(until, Clock::now() + std::chrono::milliseconds(2)),
                     [&] { return request.done(); });
    }
    waiters_.fetch_sub(1);
  }
  return true;
}

void Transport::TryProgress() {
  if (!driver_mu_.try_lock()) return;
  DriveOnce();
  driver_mu_.unlock();
  NotifyWaiters();
}

void Transport::ProgressLoop() {
  const auto delay = std::chrono::microseconds(options_.async_progress_delay_us);
  const int64_t delay_ns = options_.async_progress_delay_us * 1000;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_.load()) {
    const int64_t idle_ns = NowNs() - last_drive_ns_.load();
    if (unfinished_.load() == 0) {
      if (idle_ns > std::chrono::nanoseconds(kLinger).count()) {
        // A poster that counted its op before seeing thread_idle_ false
        // is caught by the predicate; one that saw it true notifies.
        thread_idle_.store(true);
        thread_cv_.wait(lock, [&] { return stopping_.load() || unfinished_.load() > 0; });
        thread_idle_.store(false);
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
      // Drive until nothing is left, or hand over to a waiter at once. An
      // aborted communicator's ops complete at once (Abort), so they leave
      // unfinished_ on the next pass.
      DriveUntil(
          [&] {
            return unfinished_.load() == 0 || waiters_.load() > 0 || stopping_.load();
          },
          Clock::time_point::max());
      driver_mu_.unlock();
      NotifyWaiters();
      lock.lock();
      continue;
    }
    // Another thread drives: a waiter that sleeps in poll() on the worker
    // between events (its passes stop, so the ops look idle), or a long
    // pass. It completes these ops; check again after `delay`, not at once
    // (that loop spun on the clock and the locks for as long as the waiter
    // slept: a core's worth of CPU beside a blocked wait).
    lock.lock();
    thread_cv_.wait_for(lock, delay);
  }
}

}  // namespace syncline::ucx_backend
