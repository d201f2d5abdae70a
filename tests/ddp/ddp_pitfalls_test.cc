// ddp_pitfalls_test.cc: each DDP pitfall warning fires on a program that
// falls into the trap, names the fix, and stays quiet on a correct program.
// Two ranks per case; the warning is printed by rank 0.
#include <ATen/Parallel.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>

#include <thread>

#include "common/multiprocess.h"
#include "ddp_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncline::ddp::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using syncline::testing::RankResult;
using syncline::testing::RunOptions;
using syncline::testing::RunRanks;

// Runs `body` on 2 ranks and returns rank 0's output.
std::string Rank0Output(const std::function<void(int)>& body, RunOptions options = {}) {
  auto results = RunRanks(2, [&](int rank, int) {
    at::set_num_threads(1);
    body(rank);
  }, options);
  syncline::testing::ExpectAllSucceeded(results);
  return results.empty() ? "" : results[0].output;
}

// One synced training step of `model` through `ddp` on this rank's shard.
void Step(DistributedDataParallel& ddp, Mlp& model, torch::optim::SGD& opt, int rank,
          int step) {
  opt.zero_grad();
  Batch b = Shard(MlpBatch(8, step), rank, 4);
  auto out = ddp.Forward(model, b.x, /*use_extra=*/true);
  torch::mse_loss(out, b.y).backward();
  opt.step();
}

TEST(DdpPitfalls, ManyTinyBucketsWarn) {
  std::string out = Rank0Output([](int) {
    torch::nn::Sequential net;
    for (int i = 0; i < 60; ++i) net->push_back(torch::nn::Linear(4, 4));  // 120 params
    DistributedDataParallel ddp(net.ptr(), Connect(),
                                {.bucket_cap_mb = 1e-6, .first_bucket_mb = 1e-6});
    EXPECT_GT(ddp.buckets().size(), 100u);
  });
  EXPECT_THAT(out, HasSubstr("[pitfall bucket_cap]"));
  EXPECT_THAT(out, HasSubstr("raise DdpOptions::bucket_cap_mb"));
}

TEST(DdpPitfalls, OneLargeBucketWarns) {
  std::string out = Rank0Output([](int) {
    torch::nn::Sequential net(torch::nn::Linear(2048, 1024), torch::nn::Linear(1024, 256));
    DistributedDataParallel ddp(net.ptr(), Connect(),
                                {.bucket_cap_mb = 100, .first_bucket_mb = 100});
    EXPECT_EQ(ddp.buckets().size(), 1u);
  });
  EXPECT_THAT(out, HasSubstr("[pitfall bucket_cap]"));
  EXPECT_THAT(out, HasSubstr("no overlap"));
}

TEST(DdpPitfalls, DefaultBucketsAreQuiet) {
  std::string out = Rank0Output([](int) {
    torch::nn::Sequential net(torch::nn::Linear(2048, 1024), torch::nn::Linear(1024, 256));
    DistributedDataParallel ddp(net.ptr(), Connect());
    EXPECT_GE(ddp.buckets().size(), 2u);
  });
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

TEST(DdpPitfalls, IntraOpThreadsOversubscribeTheCores) {
  RunOptions options;
  options.env["LOCAL_WORLD_SIZE"] = "2";
  std::string out = Rank0Output([](int) {
    at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
    Mlp model = MakeModel<Mlp>(1);
    DistributedDataParallel ddp(model.ptr(), Connect());
  }, options);
  EXPECT_THAT(out, HasSubstr("[pitfall oversubscription]"));
  EXPECT_THAT(out, HasSubstr("torch::set_num_threads("));
}

TEST(DdpPitfalls, ForwardOutsideNoSyncBackwardInsideWarns) {
  std::string out = Rank0Output([](int rank) {
    Mlp model = MakeModel<Mlp>(1);
    DistributedDataParallel ddp(model.ptr(), Connect());
    Batch b = Shard(MlpBatch(8, 0), rank, 4);
    auto out = ddp.Forward(model, b.x, /*use_extra=*/true);  // synced forward
    auto guard = ddp.NoSync();                                 // too late
    torch::mse_loss(out, b.y).backward();
  });
  EXPECT_THAT(out, HasSubstr("[pitfall no_sync_mismatch]"));
  EXPECT_THAT(out, HasSubstr("enter NoSync() before the forward"));
}

TEST(DdpPitfalls, CorrectNoSyncAccumulationIsQuiet) {
  std::string out = Rank0Output([](int rank) {
    Mlp model = MakeModel<Mlp>(1);
    DistributedDataParallel ddp(model.ptr(), Connect());
    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int micro = 0; micro < 3; ++micro) {
      std::optional<DistributedDataParallel::NoSyncGuard> guard;
      if (micro < 2) guard.emplace(ddp.NoSync());
      Batch b = Shard(MlpBatch(8, micro), rank, 4);
      torch::mse_loss(ddp.Forward(model, b.x, true), b.y).backward();
    }
    opt.step();
  });
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

TEST(DdpPitfalls, ReplicasThatDriftApartAreNamed) {
  RunOptions options;
  options.env["SYNCLINE_CHECK_EVERY"] = "3";
  std::string out = Rank0Output([](int rank) {
    Mlp model = MakeModel<Mlp>(1);
    DistributedDataParallel ddp(model.ptr(), Connect());
    torch::optim::SGD opt(model->parameters(), 0.1);
    Step(ddp, model, opt, rank, 0);
    if (rank == 1) {
      // A parameter changed outside the optimizer on one rank only.
      torch::NoGradGuard no_grad;
      model->fc1->weight.add_(0.5);
    }
    for (int step = 1; step < 3; ++step) Step(ddp, model, opt, rank, step);
  }, options);
  EXPECT_THAT(out, HasSubstr("[pitfall replica_drift] "));
  EXPECT_THAT(out, HasSubstr("at synced iteration 3 the model replicas differ"));
  EXPECT_THAT(out, HasSubstr("first differing parameter 'fc1.weight' (ranks [1] differ"));
}

TEST(DdpPitfalls, SynchronizedReplicasAreQuiet) {
  RunOptions options;
  options.env["SYNCLINE_CHECK_EVERY"] = "2";
  std::string out = Rank0Output([](int rank) {
    Mlp model = MakeModel<Mlp>(1);
    DistributedDataParallel ddp(model.ptr(), Connect());
    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int step = 0; step < 6; ++step) Step(ddp, model, opt, rank, step);
  }, options);
  EXPECT_THAT(out, Not(HasSubstr("[pitfall")));
}

}  // namespace
}  // namespace syncline::ddp::testing
