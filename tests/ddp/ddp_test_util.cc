// ddp_test_util.cc: see ddp_test_util.h.
#include "ddp/ddp_test_util.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>
#include <torch/utils.h>

#include <exception>

#include "gtest/gtest.h"

namespace syncline::ddp::testing {

std::shared_ptr<Communicator> Connect(const std::string& backend, absl::Duration timeout) {
  CommunicatorOptions options;
  options.backend = backend;
  options.timeout = timeout;  // zero: SYNCLINE_TIMEOUT
  auto comm = Communicator::Create(options);
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (!comm.ok()) return nullptr;
  return std::shared_ptr<Communicator>(std::move(comm).value());
}

MlpImpl::MlpImpl() {
  fc1 = register_module("fc1", torch::nn::Linear(8, 16));
  fc2 = register_module("fc2", torch::nn::Linear(16, 16));
  fc3 = register_module("fc3", torch::nn::Linear(16, 4));
  extra = register_module("extra", torch::nn::Linear(16, 4));
}

at::Tensor MlpImpl::forward(const at::Tensor& x, bool use_extra) {
  at::Tensor h = torch::tanh(fc2(torch::tanh(fc1(x))));
  at::Tensor out = fc3(h);
  return use_extra ? out + extra(h) : out;
}

CnnImpl::CnnImpl() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 6, 3)));
  head = register_module("head", torch::nn::Linear(6 * 4 * 4, 4));
}

at::Tensor CnnImpl::forward(const at::Tensor& x) {
  at::Tensor h = torch::relu(conv2(torch::relu(conv1(x))));
  return head(h.flatten(1));
}

Batch MlpBatch(int64_t n, int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  return {at::randn({n, 8}, gen), at::randn({n, 4}, gen)};
}

Batch CnnBatch(int64_t n, int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2000 + step);
  return {at::randn({n, 1, 8, 8}, gen), at::randn({n, 4}, gen)};
}

Batch Shard(const Batch& global, int rank, int64_t per_rank) {
  return {global.x.narrow(0, rank * per_rank, per_rank),
          global.y.narrow(0, rank * per_rank, per_rank)};
}

template <typename M>
M MakeModel(uint64_t seed) {
  torch::manual_seed(seed);
  return M();
}
template Mlp MakeModel<Mlp>(uint64_t);
template Cnn MakeModel<Cnn>(uint64_t);

std::vector<at::Tensor> Snapshot(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

void ExpectTensorsClose(const at::Tensor& got, const at::Tensor& want, double rtol,
                        double atol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_TRUE(want.defined()) << what << ": oracle undefined";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const at::Tensor g = got.detach().to(at::kDouble);
  const at::Tensor w = want.detach().to(at::kDouble);
  EXPECT_TRUE(at::allclose(g, w, rtol, atol))
      << what << ": max |diff| = " << (g - w).abs().max().item<double>()
      << ", max |want| = " << w.abs().max().item<double>();
}

void ExpectParamsClose(torch::nn::Module& got, torch::nn::Module& want, double rtol,
                       double atol, const std::string& what) {
  auto g = got.named_parameters();
  auto w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    ExpectTensorsClose(g[i].value(), w[i].value(), rtol, atol, what + " " + g[i].key());
  }
}

std::string ThrownMessage(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace syncline::ddp::testing
