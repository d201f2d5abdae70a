// A downstream DDP program, built with `pkg-config --cflags --libs
// syncline-ddp` alone: one synced backward of a linear model on every rank.
// Rank r feeds an input of all (r + 1), so the gradient of sum(w . x) is
// r + 1 on rank r and the averaged gradient is the mean of 1..n, (n + 1) / 2.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "syncline/ddp/distributed.h"

int main() {
  std::shared_ptr<syncline::Communicator> comm = syncline::ddp::ThrowIfError(
      syncline::Communicator::Create({}), "connect");
  torch::nn::Linear net(torch::nn::LinearOptions(4, 1).bias(false));
  syncline::ddp::DistributedDataParallel ddp(net.ptr(), comm);
  const int rank = comm->rank();
  const int n = comm->size();
  torch::Tensor x = torch::full({1, 4}, static_cast<float>(rank + 1));
  ddp.Forward(net, x).sum().backward();
  const double expected = (n + 1) / 2.0;
  const torch::Tensor grad = net->weight.grad();
  const bool ok = grad.defined() &&
                  (grad - expected).abs().max().item<double>() < 1e-6;
  std::printf("downstream ddp rank %d/%d: %s (gradient %s, expected %g)\n", rank, n,
              ok ? "OK" : "WRONG",
              grad.defined() ? std::to_string(grad[0][0].item<double>()).c_str() : "none",
              expected);
  return ok ? 0 : 1;
}
