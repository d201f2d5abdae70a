// ddp_module_test.cc: DdpModule<M>, DDP as a torch::nn module holder.
//
// Oracle: the same model trained in one process on the global batch (as in
// ddp_equivalence_test.cc), here driven only through the holder: model(x),
// an optimizer over model->parameters(), NoSync() for accumulation. The
// holder's parameters must be the wrapped module's own tensors, so that the
// optimizer steps the model that DDP reduces.
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <sstream>
#include <string>

#include "common/multiprocess.h"
#include "ddp/ddp_test_util.h"
#include "gtest/gtest.h"
#include "syncline/ddp/module.h"

namespace syncline::ddp::testing {
namespace {

constexpr int kWorld = 2;
constexpr int kSteps = 3;
constexpr int64_t kPerRank = 6;

void ExpectSameTensors(torch::nn::Module& holder, torch::nn::Module& wrapped) {
  const auto got = holder.named_parameters();
  const auto want = wrapped.named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].key(), "module." + want[i].key());
    EXPECT_TRUE(got[i].value().is_same(want[i].value())) << got[i].key();
  }
  const auto params = holder.parameters();
  ASSERT_EQ(params.size(), want.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].is_same(want[i].value())) << want[i].key();
  }
}

void TrainThroughTheHolder(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  const int world = comm->size();
  // Different initial weights per rank: the holder must broadcast rank 0's.
  Mlp net = MakeModel<Mlp>(300 + rank);
  Mlp oracle = MakeModel<Mlp>(300);
  DdpModule<Mlp> model(net, comm);
  ExpectSameTensors(*model, *net);
  EXPECT_TRUE(model->module().ptr() == net.ptr());

  std::ostringstream printed;
  printed << model;
  EXPECT_NE(printed.str().find("syncline::ddp::DdpModule(rank=" + std::to_string(rank) +
                               "/" + std::to_string(world) + ")"),
            std::string::npos)
      << printed.str();
  EXPECT_NE(printed.str().find("(module): "), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("(fc1): torch::nn::Linear"), std::string::npos)
      << printed.str();

  model->eval();
  EXPECT_FALSE(net->is_training());
  EXPECT_FALSE(net->fc1->is_training());
  model->train();
  EXPECT_TRUE(net->fc1->is_training());

  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD oracle_opt(oracle->parameters(),
                               torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < kSteps; ++step) {
    const Batch global = MlpBatch(kPerRank * world, step);
    const Batch mine = Shard(global, rank, kPerRank);
    opt.zero_grad();
    if (step == kSteps - 1) {
      // The last step in two micro-batches: the first one local, under the
      // holder's NoSync(); the sum is reduced once by the second.
      const int64_t half = kPerRank / 2;
      {
        auto no_sync = model->NoSync();
        (torch::nn::functional::mse_loss(model(mine.x.narrow(0, 0, half)),
                                         mine.y.narrow(0, 0, half)) /
         2)
            .backward();
      }
      (torch::nn::functional::mse_loss(model->forward(mine.x.narrow(0, half, half)),
                                       mine.y.narrow(0, half, half)) /
       2)
          .backward();
    } else {
      torch::nn::functional::mse_loss(model(mine.x), mine.y).backward();
    }
    opt.step();

    oracle_opt.zero_grad();
    torch::nn::functional::mse_loss(oracle->forward(global.x), global.y).backward();
    oracle_opt.step();
  }
  ExpectParamsClose(*net, *oracle, 1e-5, 1e-6, "holder world " + std::to_string(world));
  EXPECT_TRUE(model->ddp().buckets_rebuilt());
}

TEST(DdpModuleTest, TrainsLikeOneProcessOnTheWholeBatch) {
  auto results = syncline::testing::RunRanks(
      kWorld,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect();
        ASSERT_NE(comm, nullptr);
        try {
          TrainThroughTheHolder(comm);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
        }
      },
      {.timeout = absl::Seconds(120)});
  syncline::testing::ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::ddp::testing
