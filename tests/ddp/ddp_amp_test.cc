// ddp_amp_test.cc: 4-rank checks: replica mismatch, f16 overflow in the
// reduction, GradScaler with an inf on one rank, and uneven inputs (Join).
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <sstream>
#include <string>

#include "common/multiprocess.h"
#include "ddp/ddp_test_util.h"
#include "gtest/gtest.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/grad_scaler.h"

namespace syncline::ddp::testing {
namespace {

constexpr int kWorld = 4;

// fc2's width depends on the rank (rank 2 differs); rank 3 has one more layer.
struct MismatchImpl : torch::nn::Module {
  MismatchImpl(int rank) {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, rank == 2 ? 17 : 16));
    if (rank == 3) register_module("fc3", torch::nn::Linear(16, 4));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mismatch);

void CheckMismatch(std::shared_ptr<Communicator> comm) {
  Mismatch model(comm->rank());
  const std::string error =
      ThrownMessage([&] { DistributedDataParallel ddp(model.ptr(), comm); });
  EXPECT_NE(error.find("parameter #2 'fc2.weight'"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0 has f32[16, 16]"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 2 has f32[17, 16]"), std::string::npos) << error;
  EXPECT_NE(error.find("Ranks that differ from rank 0: 2, 3"), std::string::npos)
      << error;
}

// One f16 parameter whose gradient is 30000 in every element on every rank.
struct HalfParamImpl : torch::nn::Module {
  HalfParamImpl() { p = register_parameter("p", torch::zeros({8}, at::kHalf)); }
  at::Tensor p;
};
TORCH_MODULE(HalfParam);

at::Tensor ReduceHalfGrad(std::shared_ptr<Communicator> comm,
                          ReductionOptions reduction) {
  HalfParam model;
  DdpOptions options;
  options.reduction = reduction;
  DistributedDataParallel ddp(model.ptr(), comm, options);
  ddp.PrepareForward();
  (model->p.to(at::kFloat) * 30000.0f).sum().backward();
  EXPECT_EQ(model->p.grad().scalar_type(), at::kHalf);
  return model->p.grad().to(at::kFloat);
}

void CheckHalfOverflow(std::shared_ptr<Communicator> comm) {
  const bool f16_native =
      comm->SupportsReduce(DataType::kFloat16, ReduceOp::kSum, Device::Cpu());
  const at::Tensor want = at::full({8}, 30000.0f);
  ReductionOptions naive;
  naive.pre_divide_factor = 1;  // sum 4 x 30000 = 120000 > 65504 in f16
  const at::Tensor naive_grad = ReduceHalfGrad(comm, naive);
  if (f16_native) {
    EXPECT_TRUE(at::isinf(naive_grad).all().item<bool>()) << naive_grad;
  } else {
    // The backend cannot sum f16: the default falls back to f32.
    std::cerr << "note: backend has no f16 sum; naive reduction runs in f32\n";
    ExpectTensorsClose(naive_grad, want, 0, 0, "naive (f32 fallback)");
  }
  ReductionOptions f32;
  f32.reduce_dtype = at::kFloat;
  ExpectTensorsClose(ReduceHalfGrad(comm, f32), want, 0, 0, "f32 accumulation");
  ExpectTensorsClose(ReduceHalfGrad(comm, {}), want, 0, 0, "auto pre-divide");
  ReductionOptions full;
  full.pre_divide_factor = kWorld;
  ExpectTensorsClose(ReduceHalfGrad(comm, full), want, 0, 0, "pre-divide by world");
}

void CheckGradScaler(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  Mlp model = MakeModel<Mlp>(11);
  Mlp oracle = MakeModel<Mlp>(11);
  DistributedDataParallel ddp(model.ptr(), comm);
  torch::optim::SGD opt(model->parameters(), 0.1);
  torch::optim::SGD oracle_opt(oracle->parameters(), 0.1);
  GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  GradScaler scaler(comm, options);
  const std::vector<double> expect_scale = {512, 512, 1024};
  for (int step = 0; step < 3; ++step) {
    const Batch global = MlpBatch(4 * kWorld, 70 + step);
    const Batch mine = Shard(global, rank, 4);
    opt.zero_grad();
    at::Tensor loss = torch::nn::functional::mse_loss(ddp.Forward(model, mine.x), mine.y);
    scaler.Scale(loss).backward();
    if (step == 0 && rank == 2) {
      // After the reduction: only this rank sees the inf.
      model->fc2->weight.mutable_grad()[0][0] = INFINITY;
    }
    const bool stepped = scaler.Step(opt);
    scaler.Update();
    EXPECT_EQ(stepped, step != 0) << "step " << step;
    EXPECT_EQ(scaler.scale(), expect_scale[step]) << "step " << step;
    if (step != 0) {
      // The oracle skips step 0 and trains unscaled.
      oracle_opt.zero_grad();
      torch::nn::functional::mse_loss(oracle->forward(global.x), global.y).backward();
      oracle_opt.step();
    }
  }
  ExpectParamsClose(*model, *oracle, 1e-5, 1e-6, "GradScaler");
  // Checkpoint round trip.
  torch::serialize::OutputArchive out;
  scaler.Save(out);
  std::stringstream stream;
  out.save_to(stream);
  torch::serialize::InputArchive in;
  in.load_from(stream);
  GradScaler restored(comm, {});
  restored.Load(in);
  EXPECT_EQ(restored.scale(), scaler.scale());
  EXPECT_EQ(restored.growth_tracker(), scaler.growth_tracker());
}

// Uneven inputs: rank r has r + 1 batches. Finished ranks shadow the others
// inside Join(); they count as zero gradients divided by the full world.
void CheckJoin(std::shared_ptr<Communicator> comm) {
  const int rank = comm->rank();
  Mlp model = MakeModel<Mlp>(20 + rank);
  Mlp oracle = MakeModel<Mlp>(20);
  DistributedDataParallel ddp(model.ptr(), comm);
  torch::optim::SGD opt(model->parameters(), 0.1);
  torch::optim::SGD oracle_opt(oracle->parameters(), 0.1);
  int64_t shadowed = 0;
  {
    auto join = ddp.Join();
    for (int step = 0; step <= rank; ++step) {
      const Batch mine = Shard(MlpBatch(4 * kWorld, 90 + step), rank, 4);
      opt.zero_grad();
      torch::nn::functional::mse_loss(ddp.Forward(model, mine.x), mine.y).backward();
      opt.step();
    }
    shadowed = join.Finish();
  }
  EXPECT_EQ(shadowed, kWorld - 1 - rank);
  // Oracle: the same steps in one process, only the ranks that still had data.
  for (int step = 0; step <= rank; ++step) {
    oracle_opt.zero_grad();
    for (int r = step; r < kWorld; ++r) {
      const Batch b = Shard(MlpBatch(4 * kWorld, 90 + step), r, 4);
      (torch::nn::functional::mse_loss(oracle->forward(b.x), b.y) / kWorld).backward();
    }
    oracle_opt.step();
  }
  ExpectParamsClose(*model, *oracle, 1e-5, 1e-6, "join rank " + std::to_string(rank));
}

TEST(DdpAmpTest, MismatchHalfOverflowGradScalerJoin) {
  auto results = syncline::testing::RunRanks(
      kWorld,
      [](int rank, int) {
        torch::set_num_threads(1);
        std::shared_ptr<Communicator> comm = Connect();
        ASSERT_NE(comm, nullptr);
        try {
          CheckMismatch(comm);
          CheckHalfOverflow(comm);
          CheckGradScaler(comm);
          CheckJoin(comm);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << rank << ": " << e.what();
        }
      },
      {.timeout = absl::Seconds(200)});
  syncline::testing::ExpectAllSucceeded(results);
}

}  // namespace
}  // namespace syncline::ddp::testing
