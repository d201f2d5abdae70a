// doc_prelude_ddp.h: what the documentation's libtorch C++ blocks take as the
// reader's own code: a model, its data, the loop's state. Declarations only:
// the blocks are compiled, not run.
#ifndef SYNCLINE_TESTS_DOCS_DOC_PRELUDE_DDP_H_
#define SYNCLINE_TESTS_DOCS_DOC_PRELUDE_DDP_H_

#include <torch/torch.h>

#include <memory>
#include <utility>
#include <vector>

#include "syncline/communicator.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/module.h"

// Any torch::nn::Module.
struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// This rank's share of the data: (input, label) batches.
using Batch = std::pair<torch::Tensor, torch::Tensor>;
std::vector<Batch> MyShard(int rank, int world);
extern std::vector<Batch> my_shard;
extern std::vector<Batch> my_shard_of_any_length;
extern std::vector<torch::Tensor> x, y;  // micro-batches
extern int micro_batches;
torch::Tensor loss_of(const torch::Tensor& output, const torch::Tensor& target);

// A torch::data dataset of (input, label) examples.
struct MyDataset : torch::data::datasets::Dataset<MyDataset> {
  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;
};
extern MyDataset dataset;
extern int epochs;

// The training loop's state.
extern std::shared_ptr<syncline::Communicator> comm;
extern Net net;
extern syncline::ddp::DistributedDataParallel ddp;
extern syncline::ddp::DdpModule<Net> model;  // the holder form of `ddp`
extern torch::optim::SGD opt;
extern torch::Tensor loss;

#endif  // SYNCLINE_TESTS_DOCS_DOC_PRELUDE_DDP_H_
