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
constexpr char kBothFaultFolders[] = DOCTOR_PLUGIN_DIR "/on_load:" DOCTOR_PLUGIN_DIR "/at_exit";

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

// A library that hangs at exit (here a backend's destructor; in CI once, it
// seems, a thread pool that libtorch starts) must not hang the doctor: the
// probes run in a child that leaves with _exit. Before, the doctor printed
// nothing (stdout was still buffered) and was killed at the timeout.
TEST(Doctor, LibraryThatHangsAtExitDoesNotHangTheDoctor) {
  auto r = RunCommand(absl::StrCat("SYNCLINE_PLUGIN_PATH=", DOCTOR_PLUGIN_DIR, "/at_exit ",
                                   Doctor(), " 2>&1"),
                      absl::Seconds(30));
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("hangatexit ok"));
  EXPECT_THAT(r.output, HasSubstr("gloo   ok"));
}

// A backend whose library hangs or crashes while loading is named, with what
// a job would see and how to find the library; the other probes still run
// (one after the hang among them), and the exit status says so.
TEST(Doctor, BackendsThatHangOrCrashWhileLoadingAreReported) {
  auto r = RunCommand(absl::StrCat("SYNCLINE_PLUGIN_PATH=", kBothFaultFolders, " ", Doctor(),
                                   " --probe-timeout-s=2 2>&1"),
                      absl::Seconds(60));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("hangonload hung        loading it did not finish within 2s: a job "
                        "with SYNCLINE_BACKEND=hangonload would hang at start-up the same way; "
                        "`LD_DEBUG=libs syncline-doctor` names the library"));
  EXPECT_THAT(r.output, HasSubstr("crashonload crashed     loading it killed the process that "
                                  "ran it (signal 11 (Segmentation fault)): a job with "
                                  "SYNCLINE_BACKEND=crashonload would die"));
  EXPECT_THAT(r.output, HasSubstr("hangatexit ok"));
  EXPECT_THAT(r.output, HasSubstr("gloo   ok"));  // probed after the crash
  EXPECT_THAT(r.output, HasSubstr("ucx    ok"));  // and after the hang
  EXPECT_THAT(r.output, HasSubstr("libtorch     libtorch_cpu.so loads"));
  // One hang costs its 2 s, not the whole run.
  EXPECT_LT(r.seconds, 25) << r.output;
}

TEST(Doctor, JsonSaysWhichProbeHung) {
  auto r = RunCommand(absl::StrCat("SYNCLINE_PLUGIN_PATH=", kBothFaultFolders, " ", Doctor(),
                                   " --json --probe-timeout-s=2 | python3 -c 'import json,sys; "
                                   "d=json.load(sys.stdin); print(sorted((x[\"name\"], "
                                   "x[\"probe\"]) for x in d[\"backends\"]))'"),
                      absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.output;  // python's: the JSON parsed
  EXPECT_THAT(r.output, HasSubstr("('crashonload', 'crashed')"));
  EXPECT_THAT(r.output, HasSubstr("('gloo', 'answered')"));
  EXPECT_THAT(r.output, HasSubstr("('hangonload', 'hung')"));
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
