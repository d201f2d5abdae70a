// models.cc: MLP and CNN for the digits.
#include "models.h"

#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/relu.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"

namespace syncline::train {
namespace {

class Mlp : public DigitsNet {
 public:
  Mlp()
      : fc1_(register_module("fc1", torch::nn::Linear(64, 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, 64))),
        fc3_(register_module("fc3", torch::nn::Linear(64, 10))) {}

  at::Tensor forward(at::Tensor x) override {
    x = at::relu(fc1_->forward(x));
    x = at::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Linear fc1_, fc2_, fc3_;
};

class Cnn : public DigitsNet {
 public:
  Cnn()
      : conv1_(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        conv2_(register_module(
            "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        fc1_(register_module("fc1", torch::nn::Linear(32 * 4 * 4, 64))),
        fc2_(register_module("fc2", torch::nn::Linear(64, 10))) {}

  at::Tensor forward(at::Tensor x) override {
    x = x.view({-1, 1, 8, 8});
    x = at::relu(conv1_->forward(x));
    x = at::max_pool2d(at::relu(conv2_->forward(x)), {2, 2});
    x = at::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<DigitsNet>> MakeModel(const std::string& name) {
  if (name == "mlp") return std::shared_ptr<DigitsNet>(std::make_shared<Mlp>());
  if (name == "cnn") return std::shared_ptr<DigitsNet>(std::make_shared<Cnn>());
  return absl::InvalidArgumentError(
      absl::StrCat("--model=", name, " is not a model; use mlp or cnn"));
}

}  // namespace syncline::train
