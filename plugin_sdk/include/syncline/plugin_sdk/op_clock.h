// op_clock.h: when an op's deadline runs out.
//
// An op's timeout (sl_op_t::timeout_ms) counts from when the op can start,
// not from when it was posted. A communicator runs its collectives in order,
// so a collective can start once the one before it has finished on this rank;
// until then it is only waiting its turn here, which no peer can be blamed
// for. Counting from posting made healthy ranks fail queued ops whose
// predecessors were slow to drain (issue 13: 100,000 queued 8-byte
// allreduces timed out at #70347).
//
// The thread that runs a communicator's ops calls Start() when it takes the
// op up (the front of its in-order queue); ops that need no turn (sends and
// receives, which Gloo and UCX start at posting) call Start() at once.
//
// Thread safety: Start() from one thread; every reader from any thread.
//
// Example:
//   OpClock clock(op.timeout_ms);       // posted now, not started
//   ...
//   clock.Start(Clock::now());          // our turn: the timeout counts from here
//   if (clock.Expired(Clock::now())) Fail("timed out after " + clock.Running());
#ifndef SYNCLINE_PLUGIN_SDK_OP_CLOCK_H_
#define SYNCLINE_PLUGIN_SDK_OP_CLOCK_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace syncline::backend {

class OpClock {
 public:
  using Clock = std::chrono::steady_clock;

  // Posted now, not started. `timeout_ms` <= 0 means no deadline.
  explicit OpClock(int64_t timeout_ms) : OpClock(timeout_ms, Clock::now()) {}

  // Posted at `posted`, not started: for a backend that reads the clock
  // once for several uses, or reads it later (SetPosted).
  OpClock(int64_t timeout_ms, Clock::time_point posted)
      : timeout_ms_(timeout_ms), posted_(posted) {}

  // Moves the posting time to `posted`, before Start(): for a backend that
  // reads the clock only when it first checks the op (the mpi backend; an
  // op that finishes before reads none). Only while no other thread reads
  // the clock: before the op is shared, or under a lock every reader takes.
  void SetPosted(Clock::time_point posted) { posted_ = posted; }

  // The op's turn has come: its timeout counts from `now`. Later calls are
  // ignored, so the first one (the real start) wins.
  void Start(Clock::time_point now) {
    int64_t expected = kNotStarted;
    started_ns_.compare_exchange_strong(expected, now.time_since_epoch().count(),
                                        std::memory_order_acq_rel);
  }

  bool started() const { return started_ns_.load(std::memory_order_acquire) != kNotStarted; }
  int64_t timeout_ms() const { return timeout_ms_; }
  Clock::time_point posted() const { return posted_; }

  // When it started; posted() while it has not.
  Clock::time_point started_at() const {
    const int64_t ns = started_ns_.load(std::memory_order_acquire);
    return ns == kNotStarted ? posted_ : Clock::time_point(Clock::duration(ns));
  }

  // time_point::max() while the op waits its turn, and when it has no
  // deadline.
  Clock::time_point deadline() const {
    if (timeout_ms_ <= 0 || !started()) return Clock::time_point::max();
    return started_at() + std::chrono::milliseconds(timeout_ms_);
  }

  bool Expired(Clock::time_point now) const { return now >= deadline(); }

  // deadline(), or for an op that has not started, the deadline it would
  // have if it started at `now`: for a step taken before the op's turn
  // (e.g. NCCL's launch at posting) that still needs a bound.
  Clock::time_point DeadlineIfStartedAt(Clock::time_point now) const {
    if (timeout_ms_ <= 0) return Clock::time_point::max();
    return started() ? deadline() : now + std::chrono::milliseconds(timeout_ms_);
  }

  // Time left, for transports that take a timeout per call: at least 1 ms
  // (Gloo treats 0 specially), at most a week (an op without a deadline
  // still needs a finite number). The full timeout if not started yet.
  std::chrono::milliseconds Remaining() const {
    constexpr std::chrono::milliseconds kWeek = std::chrono::hours(24 * 7);
    if (timeout_ms_ <= 0) return kWeek;
    const Clock::time_point now = Clock::now();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(DeadlineIfStartedAt(now) - now);
    return std::clamp(left, std::chrono::milliseconds(1), kWeek);
  }

  // For messages: "2.00 s running (posted 7.31 s ago)", or "2.00 s" when it
  // started as it was posted.
  std::string Running() const {
    const Clock::time_point now = Clock::now();
    const double running = Seconds(now - started_at());
    const double queued = Seconds(started_at() - posted_);
    char text[96];
    if (queued < 0.01) {
      std::snprintf(text, sizeof(text), "%.2f s", running);
    } else {
      std::snprintf(text, sizeof(text), "%.2f s running (after %.2f s queued behind earlier ops)",
                    running, queued);
    }
    return text;
  }

 private:
  static constexpr int64_t kNotStarted = INT64_MIN;
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  const int64_t timeout_ms_;
  Clock::time_point posted_;
  std::atomic<int64_t> started_ns_{kNotStarted};
};

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_OP_CLOCK_H_
