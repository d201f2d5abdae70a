// checkpoint_collective_test.cc: Checkpointer on 2 real ranks: one writer,
// every rank's RNG restored, and errors that reach every rank.
#include <ATen/ops/equal.h>
#include <ATen/ops/rand.h>
#include <stdlib.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/multiprocess.h"
#include "gtest/gtest.h"
#include "common/scratch_dir.h"
#include "syncline/communicator.h"
#include "syncline/ddp/agreement.h"
#include "syncline/ddp/checkpoint.h"

namespace syncline::ddp {
namespace {

using ::syncline::testing::ExpectAllSucceeded;
using ::syncline::testing::RunOptions;
using ::syncline::testing::RunRanks;

std::string SharedDir() {
  if (const char* d = std::getenv("SL_CKPT_TEST_DIR")) return d;
  return syncline::testing::ScratchDir();
}

std::shared_ptr<Communicator> Connect() {
  auto comm = Communicator::Create({});
  if (!comm.ok()) ADD_FAILURE() << comm.status();
  return comm.ok() ? std::shared_ptr<Communicator>(*std::move(comm)) : nullptr;
}

TEST(CheckpointCollective, SaveAndLoadOnTwoRanks) {
  const std::string dir = SharedDir();
  RunOptions options;
  options.env["SL_CKPT_TEST_DIR"] = dir;
  auto results = RunRanks(
      2,
      [&](int rank, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        at::manual_seed(1);
        torch::nn::Linear net(4, 3);
        at::manual_seed(100 + rank);  // a different RNG stream per rank
        auto ckpt = Checkpointer::Create(comm, {.dir = dir});
        ASSERT_TRUE(ckpt.ok()) << ckpt.status();
        CheckpointTargets targets;
        targets.model = net.ptr().get();
        TrainingProgress p;
        p.step = 5;
        ASSERT_TRUE((*ckpt)->Save(targets, p).ok());
        // Only rank 0 wrote, and the file is complete when Save returns.
        ASSERT_EQ((*ckpt)->List().size(), 1u);
        EXPECT_TRUE(VerifyCheckpointFile((*ckpt)->List()[0]).ok());
        const at::Tensor next = at::rand({3});
        const at::Tensor weight = net->weight.detach().clone();
        at::rand({100});  // move the stream on
        {
          at::NoGradGuard no_grad;
          net->weight.zero_();
        }
        auto loaded = (*ckpt)->LoadLatest(targets);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        EXPECT_EQ(loaded->progress.step, 5);
        EXPECT_TRUE(at::equal(net->weight, weight));
        EXPECT_TRUE(at::equal(at::rand({3}), next)) << "rank " << rank;
      },
      options);
  ExpectAllSucceeded(results);
}

TEST(CheckpointCollective, UnwritableFolderFailsOnEveryRankWithOneReason) {
  const std::string dir = SharedDir();
  const std::string file = dir + "/plain-file";
  if (!syncline::testing::IsChild()) std::ofstream(file) << "x";
  RunOptions options;
  options.env["SL_CKPT_TEST_DIR"] = dir;
  auto results = RunRanks(
      2,
      [&](int, int) {
        auto comm = Connect();
        ASSERT_NE(comm, nullptr);
        auto ckpt = Checkpointer::Create(comm, {.dir = file + "/ckpt"});
        ASSERT_FALSE(ckpt.ok());
        // Every rank reports rank 0's reason.
        EXPECT_NE(ckpt.status().message().find("rank 0: "), std::string::npos)
            << ckpt.status();
        EXPECT_NE(ckpt.status().message().find(file), std::string::npos) << ckpt.status();
      },
      options);
  ExpectAllSucceeded(results);
}

TEST(Agreement, LowestFailingRankWinsEverywhere) {
  auto results = RunRanks(3, [](int rank, int) {
    auto comm = Connect();
    ASSERT_NE(comm, nullptr);
    const absl::Status mine =
        rank == 0 ? absl::OkStatus()
                  : absl::NotFoundError(absl::StrCat("missing on ", rank));
    const absl::Status agreed = AgreeOnStatus(comm.get(), mine, {});
    EXPECT_TRUE(absl::IsNotFound(agreed)) << agreed;
    EXPECT_EQ(agreed.message(), "rank 1: missing on 1");
    auto values = AllgatherInt64(comm.get(), 10 * rank, {});
    ASSERT_TRUE(values.ok()) << values.status();
    EXPECT_EQ(*values, (std::vector<int64_t>{0, 10, 20}));
  });
  ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::ddp
