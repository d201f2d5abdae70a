// models.h: the two models the trainer offers for 8x8 digit images.
//
//   mlp  64 -> 128 -> 64 -> 10, ReLU        (~17k parameters)
//   cnn  conv3x3(1->16) ReLU conv3x3(16->32) ReLU maxpool2 -> 512 -> 64 -> 10
//        (~43k parameters)
// Neither uses dropout or batch norm, so a step is a pure function of the
// parameters and the batch: runs are reproducible and resume bitwise.
//
// Example:
//   torch::manual_seed(seed);
//   std::shared_ptr<DigitsNet> net = MakeModel("cnn").value();
//   at::Tensor logits = net->forward(images);   // images: [B, 64]
#ifndef SYNCLINE_EXAMPLES_TRAIN_MODELS_H_
#define SYNCLINE_EXAMPLES_TRAIN_MODELS_H_

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace syncline::train {

// DigitsNet
//
// A classifier from flattened 8x8 images [B, 64] to logits [B, 10].
class DigitsNet : public torch::nn::Module {
 public:
  virtual at::Tensor forward(at::Tensor images) = 0;
};

// MakeModel()
//
// "mlp" or "cnn"; InvalidArgument for anything else. Initialises from the
// global torch RNG, so seed it first.
absl::StatusOr<std::shared_ptr<DigitsNet>> MakeModel(const std::string& name);

}  // namespace syncline::train

#endif  // SYNCLINE_EXAMPLES_TRAIN_MODELS_H_
