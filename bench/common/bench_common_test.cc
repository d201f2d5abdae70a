// bench_common_test: WarmFor's agreement (bench_common.h).
#include "bench/common/bench_common.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace syncline::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(WarmFor, ZeroRunsNothingAndCallsNoCollective) {
  int ops = 0, agreements = 0;
  EXPECT_EQ(WarmFor(0, [&] { ++ops; }, [&](bool) { return ++agreements, true; }), 0);
  EXPECT_EQ(WarmFor(-1, [&] { ++ops; }, [&](bool) { return ++agreements, true; }), 0);
  EXPECT_EQ(ops, 0);
  EXPECT_EQ(agreements, 0);
}

TEST(WarmFor, OneRankRunsDoublingChunksForAtLeastTheTime) {
  int ops = 0, agreements = 0;
  const auto start = Clock::now();
  const int64_t ran = WarmFor(
      5, [&] { ++ops, std::this_thread::sleep_for(std::chrono::microseconds(200)); },
      [&](bool done) { return ++agreements, done; });
  EXPECT_GE(MsSince(start), 5);
  EXPECT_EQ(ran, ops);
  // Chunks of 1, 2, 4, ...: after k agreements, 2^k - 1 ops.
  EXPECT_EQ(ops, (1 << agreements) - 1);
}

// Two ranks, the second's ops four times slower: both run the same ops, and
// neither stops before both have warmed for the time.
TEST(WarmFor, TwoRanksRunTheSameOpsUntilBothAreDone) {
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, round = 0;
  bool votes[2] = {false, false}, result = false;
  auto all_done = [&](int rank, bool mine) {
    std::unique_lock<std::mutex> lock(mu);
    votes[rank] = mine;
    const int my_round = round;
    if (++arrived == 2) {
      result = votes[0] && votes[1];
      arrived = 0;
      ++round;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return round != my_round; });
    }
    return result;
  };
  int64_t ran[2] = {0, 0};
  double elapsed_ms[2] = {0, 0};
  auto rank = [&](int r) {
    const auto start = Clock::now();
    ran[r] = WarmFor(
        4, [&] { std::this_thread::sleep_for(std::chrono::microseconds(r == 0 ? 50 : 200)); },
        [&](bool done) { return all_done(r, done); });
    elapsed_ms[r] = MsSince(start);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(ran[0], ran[1]);
  EXPECT_GE(elapsed_ms[0], 4);
  EXPECT_GE(elapsed_ms[1], 4);
}

}  // namespace
}  // namespace syncline::bench
