// dist_mnist_e2e_test.cc: the dist-mnist port (examples/dist_mnist) run as a
// user runs it: 2 ranks over Gloo under syncline-run, a short run.
//
// Oracles: each rank's mean training loss falls by a fifth or more from the
// first epoch to the last, and DDP kept the replicas identical, so both ranks
// print the same checksum of their final parameters (bitwise, FNV-1a over
// the bytes).
#include <unistd.h>

#include <map>
#include <regex>
#include <string>

#include "common/multiprocess.h"
#include "gtest/gtest.h"

namespace syncline::train {
namespace {

using ::syncline::testing::BuildBinDir;

TEST(DistMnistE2E, TwoRanksLearnAndEndWithTheSameParameters) {
  const std::string launcher = BuildBinDir() + "/syncline-run";
  if (::access(launcher.c_str(), X_OK) != 0) {
    GTEST_SKIP() << launcher << " is not built";
  }
  constexpr int kEpochs = 4;
  const auto result = syncline::testing::RunCommand(
      "SYNCLINE_BACKEND=gloo " + launcher + " -n 2 -- " + BuildBinDir() +
          "/syncline-dist-mnist --epochs " + std::to_string(kEpochs) + " 2>&1",
      absl::Seconds(240));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  std::map<int, std::map<int, double>> loss;  // rank -> epoch -> loss
  const std::regex epoch_line(R"(rank (\d+) epoch (\d+) loss ([0-9.]+) accuracy)");
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), epoch_line),
       end;
       it != end; ++it) {
    loss[std::stoi((*it)[1])][std::stoi((*it)[2])] = std::stod((*it)[3]);
  }
  std::map<int, std::string> checksum;
  const std::regex checksum_line(R"(rank (\d+) parameter checksum ([0-9a-f]{16}))");
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), checksum_line),
       end;
       it != end; ++it) {
    checksum[std::stoi((*it)[1])] = (*it)[2];
  }

  ASSERT_EQ(loss.size(), 2u) << result.output;
  for (const auto& [rank, per_epoch] : loss) {
    ASSERT_EQ(per_epoch.size(), static_cast<size_t>(kEpochs)) << "rank " << rank;
    EXPECT_LT(per_epoch.at(kEpochs), 0.8 * per_epoch.at(1))
        << "rank " << rank << "'s loss did not decrease\n"
        << result.output;
  }
  ASSERT_EQ(checksum.size(), 2u) << result.output;
  EXPECT_EQ(checksum.at(0), checksum.at(1)) << result.output;
  EXPECT_NE(result.output.find("rank 0 test accuracy"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace syncline::train
