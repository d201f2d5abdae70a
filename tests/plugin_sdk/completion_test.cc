// Tests of the plugin SDK's request completion (completion.h): the first
// outcome wins, request_test's answers before and after, a wait that ends
// when another thread completes, the one timed-out wording, and a wait's
// limit from now or from a time given.
#include "syncline/plugin_sdk/completion.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::backend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(OpOutcome, TheFirstOutcomeWinsAndTestReportsIt) {
  OpOutcome outcome;
  int done = -1;
  sl_error_t err{};
  EXPECT_EQ(outcome.Test(&done, &err), SL_OK);
  EXPECT_EQ(done, 0);
  EXPECT_STREQ(err.message, "");
  EXPECT_TRUE(outcome.Complete(SL_ERR_PEER, "rank 2 closed its connection"));
  EXPECT_FALSE(outcome.Complete(SL_OK, ""));  // an abort racing the end changes nothing
  EXPECT_TRUE(outcome.done());
  EXPECT_EQ(outcome.Test(&done, &err), SL_ERR_PEER);
  EXPECT_EQ(done, 1);
  EXPECT_STREQ(err.message, "rank 2 closed its connection");
}

TEST(OpOutcome, SuccessClearsTheMessage) {
  OpOutcome outcome;
  outcome.Complete(SL_OK, "");
  sl_error_t err{};
  std::snprintf(err.message, sizeof(err.message), "stale");
  EXPECT_EQ(outcome.Report(&err), SL_OK);
  EXPECT_STREQ(err.message, "");
}

TEST(OpOutcome, WaitEndsWhenAnotherThreadCompletes) {
  OpOutcome outcome;
  std::thread ender([&] { outcome.Complete(SL_OK, ""); });
  EXPECT_TRUE(outcome.WaitUntil(SlWaitLimit(-1)));
  ender.join();
}

// Complete() wakes a waiter only when one has counted itself: in a race
// between the two, the waiter must never sleep through the end. One that
// did would sleep until its limit, 10 s, and then see the op done.
TEST(OpOutcome, NoWaiterSleepsThroughAnEndThatRacesItsWait) {
  for (int i = 0; i < 2000; ++i) {
    OpOutcome outcome;
    std::thread ender([&] {
      if (i % 2) std::this_thread::yield();
      outcome.Complete(i % 3 ? SL_OK : SL_ERR_PEER, i % 3 ? "" : "peer gone");
    });
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(outcome.WaitUntil(SlWaitLimit(10000))) << "iteration " << i;
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << "iteration " << i << ": the wait slept through the end";
    ender.join();
    sl_error_t err{};
    EXPECT_EQ(outcome.Report(&err), i % 3 ? SL_OK : SL_ERR_PEER);
  }
}

TEST(OpOutcome, WaitGivesUpAtItsLimitAndSaysSo) {
  OpOutcome outcome;
  EXPECT_FALSE(outcome.WaitUntil(SlWaitLimit(20)));
  EXPECT_FALSE(outcome.done());
  sl_error_t err{};
  EXPECT_EQ(SlWaitTimedOut(&err, "mine allreduce #5 (f32 x 8, sum)", 20), SL_ERR_TIMEOUT);
  EXPECT_THAT(std::string(err.message),
              AllOf(HasSubstr("mine allreduce #5 (f32 x 8, sum): wait timed out after 20 ms"),
                    HasSubstr("still running")));
}

TEST(SlWaitLimit, CountsFromTheTimeGivenOrNeverEnds) {
  using Clock = OpOutcome::Clock;
  const Clock::time_point now = Clock::time_point(std::chrono::seconds(1000));
  EXPECT_EQ(SlWaitLimit(250, now), now + std::chrono::milliseconds(250));
  EXPECT_EQ(SlWaitLimit(0, now), now);
  EXPECT_EQ(SlWaitLimit(-1, now), Clock::time_point::max());
  EXPECT_EQ(SlWaitLimit(-1), Clock::time_point::max());
  const Clock::time_point before = Clock::now();
  const Clock::time_point limit = SlWaitLimit(250);
  EXPECT_GE(limit, before + std::chrono::milliseconds(250));
  EXPECT_LE(limit, Clock::now() + std::chrono::milliseconds(250));
}

}  // namespace
}  // namespace syncline::backend
