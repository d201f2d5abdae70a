// main.cc: PyTorch's cpp/distributed/dist-mnist.cpp, ported to Syncline.
//
//   syncline-run -n 2 build/bin/syncline-dist-mnist
//
// The structure is the original's: a small convnet, a DataLoader over this
// rank's shard (DistributedSampler), SGD, and a per-epoch report from every
// rank, then a test pass on rank 0. What changed, as ddp/README.md's porting
// table shows: the process group is a syncline::Communicator, the model is
// wrapped in syncline::ddp::DdpModule (gradients are averaged during
// backward, so the hand-written allreduce loop is gone), the sampler is
// syncline::ddp::DistributedSampler with set_epoch(), and the data is the
// UCI digits (8x8 images, data/digits.csv.gz) as MNIST is not available
// offline. Each rank ends by printing a checksum of its parameters: DDP keeps
// the replicas identical, so every rank prints the same one.
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "examples/train/digits.h"
#include "syncline/communicator.h"
#include "syncline/ddp/error.h"
#include "syncline/ddp/module.h"
#include "syncline/ddp/sampler.h"
#include "tools/cli/usage.h"

#ifndef SYNCLINE_DEFAULT_DATA
#define SYNCLINE_DEFAULT_DATA "data/digits.csv.gz"
#endif

ABSL_FLAG(int64_t, epochs, 10, "Number of epochs.");
ABSL_FLAG(int64_t, batch_size, 32,
          "Global batch size, split evenly over the ranks as in dist-mnist (which "
          "takes 64 of MNIST's 60,000 images; the digits are 1,437).");
ABSL_FLAG(double, lr, 0.5, "Learning rate of plain SGD, as in dist-mnist.");
ABSL_FLAG(std::string, data, SYNCLINE_DEFAULT_DATA,
          "Path of digits.csv.gz (the UCI digits, see data/README.md).");

namespace {

// dist-mnist's Model, sized for 8x8 inputs: conv(3x3, pad 1) and 2x2 max
// pooling twice take 8x8 to 2x2, so the first linear layer takes 20*2*2.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(torch::nn::Conv2dOptions(1, 10, 3).padding(1)),
        conv2(torch::nn::Conv2dOptions(10, 20, 3).padding(1)),
        fc1(80, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 80});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*train=*/is_training());
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

// The digits as a torch::data dataset of (1x8x8 image, label) examples.
class DigitsDataset : public torch::data::datasets::Dataset<DigitsDataset> {
 public:
  explicit DigitsDataset(syncline::train::Digits digits) : digits_(std::move(digits)) {}
  torch::data::Example<> get(size_t index) override {
    const auto i = static_cast<int64_t>(index);
    return {digits_.images[i].view({1, 8, 8}), digits_.labels[i]};
  }
  torch::optional<size_t> size() const override {
    return static_cast<size_t>(digits_.size());
  }

 private:
  syncline::train::Digits digits_;
};

// FNV-1a over the bytes of every parameter, in named_parameters() order.
uint64_t Checksum(torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ull;
  for (const auto& p : module.parameters()) {
    const torch::Tensor t = p.detach().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  return hash;
}

int Run() {
  // The process group. Rank and world size come from syncline-run (or
  // torchrun, Slurm, OpenMPI); the backend from SYNCLINE_BACKEND.
  std::shared_ptr<syncline::Communicator> comm =
      syncline::ddp::ThrowIfError(syncline::Communicator::Create({}), "connect");
  const int rank = comm->rank();
  const int numranks = comm->size();

  auto all = syncline::ddp::ThrowIfError(
      syncline::train::LoadDigits(absl::GetFlag(FLAGS_data)), "load the digits");
  auto [train, test] =
      syncline::train::SplitDigits(all, 0.8, syncline::train::kSplitSeed);
  const int64_t train_size = train.size();

  // Distributed random sampler: this rank's shard, reshuffled every epoch.
  syncline::ddp::DistributedSamplerOptions shard;
  shard.dataset_size = train_size;
  shard.num_replicas = numranks;
  shard.rank = rank;
  shard.seed = 0;
  syncline::ddp::DistributedSampler sampler(shard);
  const int64_t batch_size_per_proc = absl::GetFlag(FLAGS_batch_size) / numranks;
  auto data_loader = torch::data::make_data_loader(
      DigitsDataset(std::move(train)).map(torch::data::transforms::Stack<>()), sampler,
      torch::data::DataLoaderOptions().batch_size(batch_size_per_proc));

  torch::manual_seed(0);
  // Wrapping broadcasts rank 0's parameters; from here on every backward
  // averages the gradients across the ranks.
  syncline::ddp::DdpModule<Net> model(Net(), comm);
  torch::optim::SGD optimizer(model->parameters(), absl::GetFlag(FLAGS_lr));

  const int64_t num_epochs = absl::GetFlag(FLAGS_epochs);
  for (int64_t epoch = 1; epoch <= num_epochs; ++epoch) {
    sampler.set_epoch(epoch);
    model->train();
    int64_t num_correct = 0;
    int64_t num_samples = 0;
    double loss_sum = 0;
    int64_t num_batches = 0;
    for (auto& batch : *data_loader) {
      auto ip = batch.data.to(torch::kF32);
      auto op = batch.target.to(torch::kLong);
      optimizer.zero_grad();
      auto prediction = model->forward(ip);
      auto loss = torch::nll_loss(prediction, op);
      loss.backward();  // the gradients are averaged over the ranks here
      optimizer.step();
      loss_sum += loss.item<double>();
      ++num_batches;
      num_correct += prediction.argmax(1).eq(op).sum().item<int64_t>();
      num_samples += op.size(0);
    }
    std::cout << absl::StrFormat("rank %d epoch %d loss %.6f accuracy %.2f%%\n", rank,
                                 epoch, loss_sum / num_batches,
                                 100.0 * num_correct / num_samples)
              << std::flush;
  }

  // Testing only in rank 0: with grad mode off, the forward communicates
  // nothing, so the other ranks need not take part.
  if (rank == 0) {
    torch::NoGradGuard no_grad;
    model->eval();
    auto prediction = model->forward(test.images.view({-1, 1, 8, 8}));
    const double accuracy =
        100.0 * prediction.argmax(1).eq(test.labels).sum().item<int64_t>() / test.size();
    std::cout << absl::StrFormat("rank 0 test accuracy %.2f%% on %d samples\n", accuracy,
                                 test.size());
  }
  std::cout << absl::StrFormat("rank %d parameter checksum %016x\n", rank,
                               Checksum(*model))
            << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  syncline::cli::Usage help;
  help.program = "syncline-dist-mnist";
  help.description =
      "PyTorch's dist-mnist example ported to Syncline: a small convnet trained "
      "on the digits with DdpModule, a DataLoader over DistributedSampler and SGD. "
      "Every rank prints its loss and accuracy per epoch and, at the end, a "
      "checksum of its parameters, which is the same on every rank.";
  help.epilog = "Example: syncline-run -n 2 syncline-dist-mnist --epochs 5";
  if (int exit = syncline::cli::ParseOrHelp(argc, argv, help, "examples/dist_mnist/");
      exit >= 0) {
    return exit;
  }
  torch::set_num_threads(1);  // one thread per rank: the ranks share the cores
  try {
    return Run();
  } catch (const c10::Error& e) {  // syncline::ddp::Error included
    std::cerr << "dist-mnist: " << e.what() << "\n";
    return 1;
  }
}
