// help_test.cc: --help of the project's programs reads like torchrun's: a
// usage line, a description, "options:" with dashed flag names and their
// metavars and defaults; no absl "Flags from <file>" listing, no underscored
// names; -h works too, exits 0, and a program's own --help after syncline-run's
// options is the program's. The benchmarks (bench/*), which parse their own
// arguments, print the same layout.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::BuildBinDir;
using testing::RunCommand;

std::string Help(const std::string& program, const std::string& flag = "--help") {
  auto r = RunCommand(absl::StrCat(BuildBinDir(), "/", program, " ", flag, " 2>&1"),
                      absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("usage: ", program, " [-h]")));
  EXPECT_THAT(r.output, HasSubstr("\noptions:\n  -h, --help            show this help"));
  EXPECT_THAT(r.output, Not(HasSubstr("Flags from")));
  EXPECT_THAT(r.output, Not(HasSubstr("--helpfull")));
  return r.output;
}

TEST(Help, LauncherInTorchrunsLayout) {
  const std::string out = Help("syncline-run");
  EXPECT_THAT(out, HasSubstr("[--node-rank NODE_RANK]"));
  EXPECT_THAT(out, HasSubstr("--nproc-per-node, -n N"));
  EXPECT_THAT(out, HasSubstr("--rdzv-id, --job-id JOB_ID"));
  EXPECT_THAT(out, HasSubstr("[--] program [args...]"));
  EXPECT_THAT(out, HasSubstr("(default: '127.0.0.1')"));
  EXPECT_THAT(out, Not(HasSubstr("--node_rank")));
  EXPECT_THAT(out, Not(HasSubstr("--master_addr")));
  EXPECT_EQ(Help("syncline-run", "-h"), out);
  EXPECT_EQ(Help("syncline-run", "-n 2 --help"), out);
}

TEST(Help, TheProgramsOwnHelpIsPassedOn) {
  auto r = RunCommand(absl::StrCat(BuildBinDir(), "/syncline-run -n 1 -- sh -c 'echo \"$0\"' --help 2>&1"),
                      absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 0] --help"));
  EXPECT_THAT(r.output, Not(HasSubstr("usage: syncline-run")));
}

TEST(Help, Doctor) {
  const std::string out = Help("syncline-doctor");
  EXPECT_THAT(out, HasSubstr("[--selftest-mib SELFTEST_MIB]"));
  EXPECT_THAT(out, HasSubstr("(default: 16)"));
  EXPECT_THAT(out, Not(HasSubstr("selftest_mib ")));
}

TEST(Help, DoctorAcceptsDashedFlagsAndRefusesStrayArguments) {
  auto bad = RunCommand(absl::StrCat(BuildBinDir(), "/syncline-doctor stray 2>&1"),
                        absl::Seconds(30));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("unexpected argument 'stray' (see --help)"));
  auto dashed = RunCommand(
      absl::StrCat("SYNCLINE_BACKEND=gloo ", BuildBinDir(), "/syncline-doctor --selftest-mib=4 2>&1"),
      absl::Seconds(30));
  EXPECT_EQ(dashed.exit_code, 0) << dashed.output;
}

// Every benchmark this build has (bench/CMakeLists.txt lists them): usage
// line, options with their defaults, exit 0, and nothing measured.
TEST(Help, Benchmarks) {
#ifndef SYNCLINE_TEST_BENCHMARKS
  GTEST_SKIP() << "no benchmark is built (SYNCLINE_BUILD_BENCH=OFF)";
#else
  const std::vector<std::string> programs = absl::StrSplit(SYNCLINE_TEST_BENCHMARKS, ',');
  EXPECT_GE(programs.size(), 1u);
  for (const std::string& program : programs) {
    SCOPED_TRACE(program);
    const std::string out = Help(program);
    EXPECT_THAT(out, HasSubstr("(default: "));
    EXPECT_THAT(out, Not(HasSubstr("#wrong"))) << "it measured instead";
  }
  EXPECT_EQ(Help("syncline-bench-membw", "-h"), Help("syncline-bench-membw"));
#endif
}

#ifdef SYNCLINE_TEST_HAVE_TRAIN
TEST(Help, Trainer) {
  const std::string out = Help("syncline-train");
  EXPECT_THAT(out, HasSubstr("[--batch-size BATCH_SIZE]"));
  EXPECT_THAT(out, HasSubstr("--checkpoint-dir CHECKPOINT_DIR"));
  EXPECT_THAT(out, HasSubstr("(default: 32)"));
  EXPECT_THAT(out, Not(HasSubstr("--batch_size")));
}
#endif

}  // namespace
}  // namespace syncline
