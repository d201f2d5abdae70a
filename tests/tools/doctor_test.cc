// doctor_test.cc: syncline-doctor reports what it finds, as text and JSON,
// and runs its allreduce self-test under the launcher.
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using testing::BuildBinDir;
using testing::BuildLibDir;
using testing::RunCommand;

std::string Doctor() { return BuildBinDir() + "/syncline-doctor"; }

TEST(Doctor, ReportsBackendsLibrariesAndInterfaces) {
  auto r = RunCommand(Doctor() + " 2>&1", absl::Seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("gloo   ok"));
  EXPECT_THAT(r.output, HasSubstr("Libraries:"));
  EXPECT_THAT(r.output, HasSubstr("CUDA runtime"));
  EXPECT_THAT(r.output, HasSubstr("lo         127.0.0.1 (loopback)"));
  EXPECT_THAT(r.output, HasSubstr("Master: 127.0.0.1:29500"));
}

TEST(Doctor, JsonIsValid) {
  auto r = RunCommand(absl::StrCat("SYNCLINE_BACKEND=gloo ", Doctor(),
                                   " --json | python3 -c 'import json,sys; d=json.load("
                                   "sys.stdin); b={x[\"name\"]:x for x in d[\"backends\"]}; "
                                   "print(\"gloo\", b[\"gloo\"][\"loaded\"]); "
                                   "print(\"libs\", sorted(x[\"name\"] for x in "
                                   "d[\"libraries\"])); "
                                   "print(\"gloo says\", b[\"gloo\"][\"detail\"]); "
                                   "print(\"path\", d[\"plugin_path\"])'"),
                      absl::Seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("gloo True"));
  // Only the libraries no backend stands for: a backend names its own
  // transport's version, so a new backend needs no probe in the doctor.
  EXPECT_THAT(r.output, HasSubstr("libs ['CUDA runtime', 'libtorch']"));
  EXPECT_THAT(r.output, HasSubstr("gloo says syncline-gloo 0.1 (gloo "));
  EXPECT_THAT(r.output, HasSubstr(BuildLibDir()));
}

TEST(Doctor, SelfTestUnderTheLauncher) {
  auto r = RunCommand(absl::StrCat(BuildBinDir(), "/syncline-run -n 2 -- ", Doctor(),
                                   " --selftest_mib=4 2>&1"),
                      absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Self-test: ok over gloo on 2 ranks, busbw"));
  EXPECT_THAT(r.output, HasSubstr("Store: a Syncline store answers"));
}

}  // namespace
}  // namespace syncline
