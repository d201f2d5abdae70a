// trainer_e2e_test.cc: the real `syncline-train` binary on real ranks.
//
// Oracles: a 1-rank run at batch 64 against 2 ranks at batch 32 (same global
// batches), gradient accumulation against a larger batch, a killed and
// resumed run against an uninterrupted one (bitwise), and a run resumed past
// a corrupted checkpoint against the same uninterrupted run (bitwise).
// Ranks are started by a small launcher here, so every rank's exit code and
// output are checked; the README's own command goes through syncline-run.
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/scratch_dir.h"
#include "syncline/tcp_store.h"

namespace syncline::train {
namespace {

using ::syncline::testing::BuildBinDir;

std::string Trainer() { return BuildBinDir() + "/syncline-train"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

std::string TempDir() { return syncline::testing::ScratchDir(); }

// How one rank of a launched trainer ended.
struct RankRun {
  int rank = 0;
  int exit_code = -1;  // 128 + signal when killed by a signal
  bool timed_out = false;
  double seconds = 0;
  std::string output;
};

// Starts `ranks` trainer processes with the rendezvous environment, the
// store hosted here (as syncline-run does), and waits for all of them. The
// RunRanks harness is not used because it re-runs the test body in each
// child, and these tests launch several jobs per test.
std::vector<RankRun> Train(int ranks, const std::vector<std::string>& args) {
  auto server = TcpStoreServer::Start({.host = "127.0.0.1", .port = 0});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  const std::string dir = TempDir();
  std::string script;
  for (int r = 0; r < ranks; ++r) {
    absl::StrAppend(&script, "(SYNCLINE_RANK=", r, " SYNCLINE_WORLD_SIZE=", ranks,
                    " SYNCLINE_LOCAL_RANK=", r, " SYNCLINE_LOCAL_WORLD_SIZE=", ranks,
                    " MASTER_ADDR=127.0.0.1 MASTER_PORT=", (*server)->port(),
                    " SYNCLINE_STORE_HOSTED=1 '", Trainer(), "'");
    for (const std::string& a : args) absl::StrAppend(&script, " '", a, "'");
    absl::StrAppend(&script, " >", dir, "/out", r, " 2>&1; echo $? >", dir, "/rc", r,
                    ") & ");
  }
  absl::StrAppend(&script, "wait");
  const auto run = syncline::testing::RunCommand(script, absl::Seconds(240));
  std::vector<RankRun> results(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankRun& res = results[static_cast<size_t>(r)];
    res.rank = r;
    res.timed_out = run.timed_out;
    res.seconds = run.seconds;
    res.output = ReadText(absl::StrCat(dir, "/out", r));
    if (!absl::SimpleAtoi(
            absl::StripAsciiWhitespace(ReadText(absl::StrCat(dir, "/rc", r))),
            &res.exit_code)) {
      res.exit_code = -1;
    }
  }
  return results;
}

// Expects every rank to have succeeded.
void ExpectOk(const std::vector<RankRun>& results) {
  ASSERT_FALSE(results.empty());
  for (const RankRun& r : results) {
    EXPECT_EQ(r.exit_code, 0) << "rank " << r.rank << ":\n" << r.output;
  }
}

std::vector<float> ReadParams(const std::string& path) {
  const std::string bytes = ReadText(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(double{a[i]} - double{b[i]}));
  }
  return worst;
}

// Trains and returns the final parameters.
std::vector<float> TrainParams(int ranks, std::vector<std::string> args) {
  const std::string file = TempDir() + "/params.bin";
  args.push_back("--save-params=" + file);
  ExpectOk(Train(ranks, args));
  return ReadParams(file);
}

// The uninterrupted 3-epoch, 2-rank run that resumed runs must equal.
const std::vector<float>& Reference() {
  static const auto* ref = new std::vector<float>(
      TrainParams(2, {"--epochs=3", "--checkpoint-dir=" + TempDir() + "/ck"}));
  return *ref;
}

TEST(TrainerE2E, OneRankAtBatch64MatchesTwoRanksAtBatch32) {
  const auto one = TrainParams(1, {"--epochs=2", "--batch-size=64"});
  const auto two = TrainParams(2, {"--epochs=2", "--batch-size=32"});
  ASSERT_FALSE(one.empty());
  EXPECT_LT(MaxAbsDiff(one, two), 1e-5);
}

TEST(TrainerE2E, AccumulatingTwoMicroBatchesOf16EqualsBatch32) {
  const auto accum = TrainParams(2, {"--epochs=2", "--batch-size=16", "--accum-steps=2"});
  const auto plain = TrainParams(2, {"--epochs=2", "--batch-size=32"});
  ASSERT_FALSE(accum.empty());
  EXPECT_LT(MaxAbsDiff(accum, plain), 1e-5);
}

TEST(TrainerE2E, KilledAfterEpoch2AndResumedEqualsUninterruptedBitwise) {
  const std::string dir = TempDir() + "/ck";
  auto killed =
      Train(2, {"--epochs=3", "--checkpoint-dir=" + dir, "--kill-after-epoch=2"});
  ASSERT_EQ(killed.size(), 2u);
  for (const RankRun& r : killed) {
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  }
  const std::string file = TempDir() + "/params.bin";
  auto resumed = Train(
      2, {"--epochs=3", "--checkpoint-dir=" + dir, "--resume", "--save-params=" + file});
  ExpectOk(resumed);
  EXPECT_NE(resumed[0].output.find("resumed from"), std::string::npos)
      << resumed[0].output;
  const auto params = ReadParams(file);
  ASSERT_EQ(params.size(), Reference().size());
  EXPECT_EQ(std::memcmp(params.data(), Reference().data(), params.size() * sizeof(float)),
            0)
      << "max abs diff " << MaxAbsDiff(params, Reference());
}

TEST(TrainerE2E, ResumedFromAMidEpochCheckpointEqualsUninterruptedBitwise) {
  // Checkpoints at steps 22 (end of epoch 1), 30 (8 steps into epoch 2)
  // and 44 (end of epoch 2). Dropping the last one's manifest makes the
  // mid-epoch one the newest.
  const std::string dir = TempDir() + "/ck";
  ExpectOk(Train(2, {"--epochs=2", "--checkpoint-dir=" + dir, "--checkpoint-every=30",
                     "--keep-checkpoints=10"}));
  ASSERT_EQ(::unlink((dir + "/checkpoint-000003.manifest").c_str()), 0);
  const std::string file = TempDir() + "/params.bin";
  auto resumed = Train(
      2, {"--epochs=3", "--checkpoint-dir=" + dir, "--resume", "--save-params=" + file});
  ExpectOk(resumed);
  EXPECT_NE(resumed[0].output.find("checkpoint-000002.pt (inside epoch 2"),
            std::string::npos)
      << resumed[0].output;
  const auto params = ReadParams(file);
  ASSERT_EQ(params.size(), Reference().size());
  EXPECT_EQ(std::memcmp(params.data(), Reference().data(), params.size() * sizeof(float)),
            0)
      << "max abs diff " << MaxAbsDiff(params, Reference());
}

TEST(TrainerE2E, CorruptedLatestCheckpointFallsBackToThePreviousOne) {
  const std::string dir = TempDir() + "/ck";
  ExpectOk(Train(2, {"--epochs=2", "--checkpoint-dir=" + dir}));
  const std::string latest = dir + "/checkpoint-000002.pt";
  {
    std::fstream f(latest, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << latest;
    f.seekp(200);
    f.write("garbage!", 8);
  }
  const std::string file = TempDir() + "/params.bin";
  auto resumed = Train(
      2, {"--epochs=3", "--checkpoint-dir=" + dir, "--resume", "--save-params=" + file});
  ExpectOk(resumed);
  const std::string& out = resumed[0].output;
  EXPECT_NE(out.find(latest + " is corrupt"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed from " + dir + "/checkpoint-000001.pt"), std::string::npos)
      << out;
  // Resumed from the end of epoch 1, it retrains epochs 2 and 3 exactly.
  const auto params = ReadParams(file);
  ASSERT_EQ(params.size(), Reference().size());
  EXPECT_EQ(std::memcmp(params.data(), Reference().data(), params.size() * sizeof(float)),
            0);
}

TEST(TrainerE2E, MixedPrecisionAndCnnRun) {
  auto results = Train(2, {"--epochs=3", "--model=cnn", "--amp"});
  ExpectOk(results);
  std::smatch m;
  const std::regex acc("done: .* val acc ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(results[0].output, m, acc)) << results[0].output;
  EXPECT_GT(std::stod(m[1]), 70.0) << results[0].output;
}

// Bad input: every rank must exit non-zero, quickly, with one line naming
// the problem.
struct BadInput {
  const char* name;
  std::vector<std::string> args;
  const char* reason;
};

class TrainerBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(TrainerBadInput, EveryRankExitsWithOneLineReason) {
  const BadInput& bad = GetParam();
  std::vector<std::string> args = bad.args;
  if (std::string(bad.name) == "cuda_without_gpu" && torch::cuda::is_available()) {
    GTEST_SKIP() << "this machine has a GPU";
  }
  if (std::string(bad.name) == "checkpoint_of_another_model") {
    const std::string dir = TempDir() + "/ck";
    ExpectOk(Train(2, {"--epochs=1", "--model=mlp", "--checkpoint-dir=" + dir}));
    args.push_back("--checkpoint-dir=" + dir);
  }
  const auto results = Train(2, args);
  ASSERT_EQ(results.size(), 2u);
  for (const RankRun& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung";
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_LT(r.seconds, 60) << r.output;
    EXPECT_NE(r.output.find(bad.reason), std::string::npos) << "rank " << r.rank << ":\n"
                                                            << r.output;
    int error_lines = 0;
    for (absl::string_view line : absl::StrSplit(r.output, '\n')) {
      if (line.find("syncline-train: error:") != absl::string_view::npos) {
        ++error_lines;
      }
    }
    EXPECT_EQ(error_lines, 1) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainerBadInput,
    ::testing::Values(BadInput{"missing_dataset",
                               {"--data=/nonexistent/digits.csv.gz"},
                               "cannot open dataset /nonexistent/digits.csv.gz"},
                      BadInput{"batch_larger_than_shard",
                               {"--batch-size=5000"},
                               "more than a rank's shard"},
                      BadInput{"cuda_without_gpu", {"--device=cuda"}, "no CUDA device"},
                      BadInput{"unwritable_checkpoint_dir",
                               {"--checkpoint-dir=/proc/syncline-test/ck"},
                               "/proc/syncline-test"},
                      BadInput{"checkpoint_of_another_model",
                               {"--model=cnn", "--resume"},
                               "was saved from a different model"}),
    [](const auto& info) { return std::string(info.param.name); });

// The README's first command: 2 ranks under syncline-run, default flags.
TEST(TrainerE2E, ReadmeCommandReachesNinetyFivePercent) {
  const std::string launcher = BuildBinDir() + "/syncline-run";
  if (::access(launcher.c_str(), X_OK) != 0) {
    GTEST_SKIP() << launcher << " is not built";
  }
  const auto result = syncline::testing::RunCommand(
      launcher + " -n 2 " + Trainer() + " 2>&1", absl::Seconds(240));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::smatch m;
  const std::regex acc("done: .* val acc ([0-9.]+)%");
  ASSERT_TRUE(std::regex_search(result.output, m, acc)) << result.output;
  EXPECT_GE(std::stod(m[1]), 95.0) << result.output;
  EXPECT_LT(result.seconds, 90) << result.output;
}

// The torchrun semantics end to end: a rank killed once in the middle of an
// epoch (by the faults interposer, in generation 0 only), syncline-run
// --max-restarts restarting every worker, and the trainer resuming from its
// latest mid-epoch checkpoint end with exactly the parameters of a run that
// was never interrupted.
TEST(TrainerE2E, RankKilledMidEpochRestartsAndEqualsUninterruptedBitwise) {
  const std::string launcher = BuildBinDir() + "/syncline-run";
  if (::access(launcher.c_str(), X_OK) != 0) GTEST_SKIP() << launcher << " is not built";
  const std::string dir = TempDir();
  auto run = [&](const std::string& env, const std::string& name, int restarts) {
    return syncline::testing::RunCommand(
        absl::StrCat(env, " ", launcher, " -n 2 --max-restarts ", restarts, " -- ",
                     Trainer(), " --epochs=3 --checkpoint-every=5 --resume"
                     " --checkpoint-dir=", dir, "/", name, " --save-params=", dir, "/",
                     name, ".bin 2>&1"),
        absl::Seconds(240));
  };
  const auto plain = run("", "plain", 0);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  // About 22 steps of at least one collective each per epoch: op 60 falls in
  // the middle of a later epoch, after several mid-epoch checkpoints.
  const auto killed = run(
      "SYNCLINE_PLUGINS=faults SYNCLINE_FAULT='kill:rank=1,op=60,restart=0'", "killed", 1);
  ASSERT_EQ(killed.exit_code, 0) << killed.output;
  EXPECT_THAT(killed.output, ::testing::HasSubstr("killed by SIGKILL"));
  EXPECT_THAT(killed.output, ::testing::HasSubstr("resumed from"));
  const auto a = ReadParams(dir + "/plain.bin");
  const auto b = ReadParams(dir + "/killed.bin");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << "max difference " << MaxAbsDiff(a, b);
}

}  // namespace
}  // namespace syncline::train
