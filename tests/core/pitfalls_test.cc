// pitfalls_test.cc: each core-side pitfall warning fires when it should, once,
// on rank 0 only, names its fix, can be silenced, and stays quiet otherwise.
// Each case runs in a fresh process: the warnings are once per process.
#include <unistd.h>

#include <cstdio>

#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/pitfalls.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunOptions;
using testing::RunRanks;

std::string RunAlone(const std::function<void()>& body, RunOptions options = {}) {
  auto results = RunRanks(1, [&](int, int) { body(); }, options);
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].exit_code, 0) << results[0].output;
  return results[0].output;
}

const int kCores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));

TEST(Pitfalls, OversubscriptionWarnsOnceWithTheFix) {
  std::string out = RunAlone([] {
    EXPECT_TRUE(CheckThreadOversubscription(0, kCores, 2));
    EXPECT_FALSE(CheckThreadOversubscription(0, kCores, 2)) << "printed twice";
  });
  EXPECT_THAT(out, HasSubstr("[pitfall oversubscription]"));
  EXPECT_THAT(out, HasSubstr("Set OMP_NUM_THREADS="));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_WARN=oversubscription"));
}

TEST(Pitfalls, OversubscriptionQuietWhenThreadsFit) {
  std::string out = RunAlone([] {
    EXPECT_FALSE(CheckThreadOversubscription(0, 1, kCores));
    EXPECT_FALSE(CheckThreadOversubscription(3, kCores, 4)) << "only rank 0 warns";
  });
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

// One RunRanks per test: a child re-runs the test body from its start.
void ExpectSilencedBy(const char* setting) {
  RunOptions options;
  options.env["SYNCLINE_WARN"] = setting;
  std::string out =
      RunAlone([] { EXPECT_FALSE(CheckThreadOversubscription(0, kCores, 4)); }, options);
  EXPECT_THAT(out, Not(HasSubstr("[pitfall"))) << setting;
}
TEST(Pitfalls, SynclineWarnSilencesByName) { ExpectSilencedBy("oversubscription"); }
TEST(Pitfalls, SynclineWarnSilencesAll) { ExpectSilencedBy("bucket_cap,all"); }

TEST(Pitfalls, VerboseLoggingOnALargeJob) {
  RunOptions options;
  options.env["SYNCLINE_LOG_RANKS"] = "all";
  std::string out = RunAlone([] { CheckStartupPitfalls(0, 64, 8); }, options);
  EXPECT_THAT(out, HasSubstr("[pitfall verbose_logging]"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_LOG_RANKS=0"));
}

TEST(Pitfalls, VerboseLoggingQuietByDefault) {
  std::string out = RunAlone([] { CheckStartupPitfalls(0, 64, 8); });
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

TEST(Pitfalls, VerboseLoggingQuietOnSmallJobs) {
  RunOptions options;
  options.env["SYNCLINE_LOG_RANKS"] = "all";
  std::string out = RunAlone([] { CheckStartupPitfalls(0, 2, 2); }, options);
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

}  // namespace
}  // namespace syncline
