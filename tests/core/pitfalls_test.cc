// pitfalls_test.cc: each core-side pitfall warning fires when it should, once,
// on rank 0 only, names its fix, can be silenced, and stays quiet otherwise.
// Each case runs in a fresh process: the warnings are once per process.
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/communicator.h"
#include "syncline/pitfalls.h"
#include "syncline/store.h"

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

TEST(Pitfalls, OversubscriptionWithOneThreadPerRankTalksAboutRanks) {
  std::string out = RunAlone([] { EXPECT_TRUE(CheckThreadOversubscription(0, 1, kCores + 1)); });
  EXPECT_THAT(out, HasSubstr("[pitfall oversubscription]"));
  EXPECT_THAT(out, HasSubstr("more ranks than cores"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("syncline-run -n ", kCores)));
  EXPECT_THAT(out, Not(HasSubstr("OMP_NUM_THREADS"))) << "threads are already 1";
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A one-rank communicator over gloo, created twice: the warnings are once
// per process.
void CreateTwice() {
  for (int i = 0; i < 2; ++i) {
    CommunicatorOptions options;
    options.rank = 0;
    options.world_size = 1;
    options.backend = "gloo";
    options.store = MakeHashStore();
    auto comm = Communicator::Create(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
  }
}

TEST(Pitfalls, MisspelledOptionIsNamedWithTheClosestKnownOne) {
  RunOptions options;
  options.env["SYNCLINE_TIMEOTU"] = "5";
  options.env["SYNCLINE_FROBNICATE"] = "1";
  std::string out = RunAlone(CreateTwice, options);
  EXPECT_THAT(out, HasSubstr("[pitfall unknown_option]"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_TIMEOTU (did you mean SYNCLINE_TIMEOUT?)"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_FROBNICATE (no option is close to it)"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_WARN=unknown_option"));
  EXPECT_EQ(Count(out, "[pitfall unknown_option]"), 1) << out;
}

TEST(Pitfalls, KnownOptionsAndTheScriptsVariablesAreQuiet) {
  RunOptions options;
  options.env["SYNCLINE_TIMEOUT"] = "30";
  options.env["SYNCLINE_LOG_LEVEL"] = "info";
  options.env["SYNCLINE_BUILD_DIR"] = "build";
  options.env["SYNCLINE_TEST_SOMETHING"] = "1";
  std::string out = RunAlone(CreateTwice, options);
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

TEST(Pitfalls, ClosestOptionOnlyWhenClose) {
  EXPECT_EQ(ClosestOption("SYNCLINE_BACKNED"), "SYNCLINE_BACKEND");
  EXPECT_EQ(ClosestOption("SYNCLINE_PLUGIN"), "SYNCLINE_PLUGINS");
  EXPECT_EQ(ClosestOption("SYNCLINE_STORE_TOKN"), "SYNCLINE_STORE_TOKEN");
  EXPECT_EQ(ClosestOption("SYNCLINE_ZZZZZZZZZZZZZ"), "");
}

TEST(Pitfalls, CheckNanWithoutTheCheckInterposerSaysItDoesNothing) {
  RunOptions options;
  options.env["SYNCLINE_CHECK_NAN"] = "1";
  std::string out = RunAlone(CreateTwice, options);
  EXPECT_THAT(out, HasSubstr("[pitfall ineffective_option]"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_CHECK_NAN=1 does nothing"));
  EXPECT_THAT(out, HasSubstr("SYNCLINE_PLUGINS=check"));
  EXPECT_EQ(Count(out, "[pitfall ineffective_option]"), 1) << out;
}

TEST(Pitfalls, CheckNanWithTheCheckInterposerIsQuiet) {
  RunOptions options;
  options.env["SYNCLINE_CHECK_NAN"] = "1";
  std::string out =
      RunAlone([] { CheckOptionPitfalls(0, {"trace", "check"}); }, options);
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

}  // namespace
}  // namespace syncline
