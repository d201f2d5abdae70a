// ddp_eval_test.cc: a forward with grad mode off (evaluation), or a forward
// and backward inside NoSync(), on some ranks only must not communicate, so
// it cannot desync the training collectives (nor the replica-drift check).
//
// Oracle: the same model trained in one process on the whole global batch
// (computed inside every rank's process from the same seeds); rank 0's
// evaluations are compared with the oracle's forward on the same input.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <optional>
#include <stdexcept>

#include "common/multiprocess.h"
#include "ddp/ddp_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/error.h"

namespace syncline::ddp::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kSteps = 6;
constexpr int64_t kPerRank = 4;

// One training step: two micro-batches, the first inside NoSync(). Starts
// with zero_grad(), which also discards any local probe's gradients.
void TrainStep(DistributedDataParallel& ddp, Mlp& model, torch::optim::SGD& opt, int rank,
               int world, int step) {
  opt.zero_grad();
  for (int micro = 0; micro < 2; ++micro) {
    std::optional<DistributedDataParallel::NoSyncGuard> guard;
    if (micro == 0) guard.emplace(ddp.NoSync());
    const Batch mine = Shard(MlpBatch(kPerRank * world, 2 * step + micro), rank, kPerRank);
    torch::nn::functional::mse_loss(ddp.Forward(model, mine.x), mine.y).backward();
  }
  opt.step();
}

void OracleStep(Mlp& oracle, torch::optim::SGD& opt, int world, int step) {
  opt.zero_grad();
  for (int micro = 0; micro < 2; ++micro) {
    const Batch global = MlpBatch(kPerRank * world, 2 * step + micro);
    // DDP averages the ranks' accumulated gradients: per micro-batch, the
    // mean of the per-shard means is the mean over the global batch.
    torch::nn::functional::mse_loss(oracle->forward(global.x), global.y).backward();
  }
  opt.step();
}

TEST(DdpEvaluation, LocalForwardsOnOneRankDoNotDesyncTraining) {
  syncline::testing::RunOptions options;
  // Small: the replica-drift check runs often, and a desync surfaces as a
  // timeout well within the test's deadline instead of a hang.
  options.env["SYNCLINE_CHECK_EVERY"] = "2";
  options.env["SYNCLINE_TIMEOUT"] = "30";
  auto results = syncline::testing::RunRanks(2, [](int rank, int world) {
    at::set_num_threads(1);
    std::shared_ptr<Communicator> comm = Connect();
    ASSERT_NE(comm, nullptr);
    try {
      Mlp model = MakeModel<Mlp>(100 + rank);
      // A buffer, so that a grad-off forward that broadcast buffers would
      // post a collective only rank 0 takes part in.
      model->register_buffer("eval_marker", at::full({3}, static_cast<double>(rank)));
      Mlp oracle = MakeModel<Mlp>(100);
      DistributedDataParallel ddp(model.ptr(), comm);
      torch::optim::SGD opt(model->parameters(), 0.1);
      torch::optim::SGD oracle_opt(oracle->parameters(), 0.1);
      int evaluations = 0;
      for (int step = 0; step < kSteps; ++step) {
        if (rank == 0) {
          // One evaluation before the first step, then three per step, so
          // rank 0's forward count differs from rank 1's at every check.
          for (int e = 0; e < (step == 0 ? 1 : 3); ++e) {
            torch::NoGradGuard no_grad;
            const at::Tensor x = MlpBatch(5, 1000 + evaluations).x;
            const at::Tensor got = ddp.Forward(model, x);
            ExpectTensorsClose(got, oracle->forward(x), 1e-5, 1e-6, "evaluation output");
            ++evaluations;
          }
          if (step % 2 == 1) {
            // A local probe inside NoSync() (forward and backward), whose
            // gradients are then discarded: it communicates nothing either.
            auto guard = ddp.NoSync();
            const Batch probe = MlpBatch(3, 2000 + step);
            torch::nn::functional::mse_loss(ddp.Forward(model, probe.x), probe.y).backward();
          }
        }
        TrainStep(ddp, model, opt, rank, world, step);
        OracleStep(oracle, oracle_opt, world, step);
      }
      ExpectParamsClose(*model, *oracle, 1e-5, 1e-6, "after training with evaluations");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": " << e.what();
    }
  }, options);
  syncline::testing::ExpectAllSucceeded(results);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[0].output, Not(HasSubstr("[pitfall")));
}

// Issue 15: the model is passed twice (ddp.Forward(model, x)); passing
// another module would have skipped gradient averaging silently. It throws,
// on every rank and before any collective, and the wrapped module still
// trains to the oracle afterwards (through its holder or its Impl pointer).
TEST(DdpForward, AModuleOtherThanTheWrappedOneIsRefused) {
  auto results = syncline::testing::RunRanks(2, [](int rank, int world) {
    at::set_num_threads(1);
    std::shared_ptr<Communicator> comm = Connect();
    ASSERT_NE(comm, nullptr);
    Mlp model = MakeModel<Mlp>(3);
    Mlp other = MakeModel<Mlp>(3);
    Mlp oracle = MakeModel<Mlp>(3);
    DistributedDataParallel ddp(model.ptr(), comm);
    torch::optim::SGD opt(model->parameters(), 0.1);
    torch::optim::SGD oracle_opt(oracle->parameters(), 0.1);
    const Batch mine = Shard(MlpBatch(kPerRank * world, 0), rank, kPerRank);
    const std::string error = ThrownMessage([&] { ddp.Forward(other, mine.x); });
    EXPECT_THAT(error, HasSubstr("not the one this DistributedDataParallel wraps"));
    EXPECT_THAT(error, HasSubstr("would never be averaged"));
    try {
      ddp.Forward(other, mine.x);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument) << e.what();
    } catch (...) {
      ADD_FAILURE() << "not a syncline::ddp::Error";
    }
    for (int step = 0; step < 2; ++step) {
      const Batch shard = Shard(MlpBatch(kPerRank * world, step), rank, kPerRank);
      opt.zero_grad();
      auto out = step == 0 ? ddp.Forward(model, shard.x) : ddp.Forward(model.ptr(), shard.x);
      torch::nn::functional::mse_loss(out, shard.y).backward();
      opt.step();
      oracle_opt.zero_grad();
      const Batch global = MlpBatch(kPerRank * world, step);
      torch::nn::functional::mse_loss(oracle->forward(global.x), global.y).backward();
      oracle_opt.step();
    }
    ExpectParamsClose(*model, *oracle, 1e-5, 1e-6, "after the refused forward");
  });
  syncline::testing::ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::ddp::testing
