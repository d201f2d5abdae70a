// ddp_test_util.h: models, data and oracles shared by the DDP tests.
//
// Every rank builds its data from fixed seeds, so each rank's process can
// also compute the single-process oracle on the whole global batch: the
// reference a DDP run must match.
#ifndef SYNCLINE_TESTS_DDP_DDP_TEST_UTIL_H_
#define SYNCLINE_TESTS_DDP_DDP_TEST_UTIL_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/communicator.h"
#include "syncline/ddp/distributed.h"

namespace syncline::ddp::testing {

// Connects over `backend` (gloo unless a test says otherwise) from the
// RunRanks environment, with the default op deadline or `timeout`; fails the
// test (and returns null) if that does not work.
std::shared_ptr<Communicator> Connect(const std::string& backend = "gloo",
                                      absl::Duration timeout = absl::ZeroDuration());

// A 3-layer MLP 8 -> 16 -> 16 -> 4 (tanh), plus an optional `extra` layer
// used only when forward() is asked to (for unused-parameter tests).
struct MlpImpl : torch::nn::Module {
  MlpImpl();
  at::Tensor forward(const at::Tensor& x, bool use_extra = true);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, extra{nullptr};
};
TORCH_MODULE(Mlp);

// A small CNN on 1x8x8 inputs: two 3x3 convolutions and a linear head (4).
struct CnnImpl : torch::nn::Module {
  CnnImpl();
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Cnn);

// Deterministic global batch: `n` samples, step `step` (inputs and targets).
struct Batch {
  at::Tensor x;
  at::Tensor y;
};
Batch MlpBatch(int64_t n, int step);
Batch CnnBatch(int64_t n, int step);
// Rows [rank * per_rank, (rank + 1) * per_rank) of `global`.
Batch Shard(const Batch& global, int rank, int64_t per_rank);

// Fresh model whose initial weights depend on `seed`.
template <typename M>
M MakeModel(uint64_t seed);

// Copies of all parameters, for comparisons.
std::vector<at::Tensor> Snapshot(torch::nn::Module& m);

// Fails the test (with the parameter name and max difference) unless every
// parameter of `got` is close to the matching one of `want`.
void ExpectParamsClose(torch::nn::Module& got, torch::nn::Module& want, double rtol,
                       double atol, const std::string& what);
void ExpectTensorsClose(const at::Tensor& got, const at::Tensor& want, double rtol,
                        double atol, const std::string& what);

// Runs `fn`, expects it to throw, and returns the message ("" if none).
std::string ThrownMessage(const std::function<void()>& fn);

}  // namespace syncline::ddp::testing

#endif  // SYNCLINE_TESTS_DDP_DDP_TEST_UTIL_H_
