// trainer_step.cc: one optimizer step (micro-batches under NoSync,
// autocast, optional GradScaler), evaluation, and small helpers.
#include <ATen/autocast_mode.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "syncline/ddp/agreement.h"
#include "syncline/status.h"
#include "trainer_impl.h"

namespace syncline::train {
namespace {

// Autocast for one forward pass: bf16 on CPU, f16 on CUDA.
class AutocastScope {
 public:
  AutocastScope(bool enabled, bool cuda) : enabled_(enabled), cuda_(cuda) {
    if (!enabled_) return;
    if (cuda_) {
      at::autocast::set_autocast_gpu_dtype(at::kHalf);
      at::autocast::set_enabled(true);
    } else {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (cuda_) {
      at::autocast::set_enabled(false);
    } else {
      at::autocast::set_cpu_enabled(false);
    }
    at::autocast::clear_cache();  // cached casts of the weights are stale
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  bool cuda_;
};

at::Tensor IndexTensor(const std::vector<int64_t>& idx, const c10::Device& d) {
  std::vector<int64_t> copy = idx;
  return at::from_blob(copy.data(), {static_cast<int64_t>(copy.size())}, at::kLong)
      .clone()
      .to(d);
}

}  // namespace

ddp::CheckpointTargets Targets(DigitsNet* model, torch::optim::SGD* opt,
                               ddp::GradScaler* scaler) {
  ddp::CheckpointTargets t;
  t.model = model;
  t.optimizer = opt;
  t.scaler = scaler;
  return t;
}

void Trainer::SetLearningRate(double lr) {
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
  }
}

double Trainer::TrainStep() {
  optimizer_->zero_grad();
  double loss_sum = 0;
  for (int64_t m = 0; m < c_.accum_steps; ++m) {
    const std::vector<int64_t> idx = sampler_->NextBatch(c_.batch_size);
    const at::Tensor index = IndexTensor(idx, device_);
    const at::Tensor x = train_.images.index_select(0, index);
    const at::Tensor y = train_.labels.index_select(0, index);
    // All but the last micro-batch accumulate locally; the last one's
    // backward reduces the accumulated sum once.
    std::optional<ddp::DistributedDataParallel::NoSyncGuard> no_sync;
    if (m + 1 < c_.accum_steps) no_sync.emplace(ddp_->NoSync());
    ddp_->PrepareForward();
    at::Tensor logits;
    {
      AutocastScope autocast(c_.amp, device_.is_cuda());
      logits = model_->forward(x);
    }
    const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), y);
    loss_sum += loss.item<double>() * static_cast<double>(idx.size());
    const at::Tensor scaled = loss / static_cast<double>(c_.accum_steps);
    if (scaler_) {
      scaler_->Scale(scaled).backward();
    } else {
      scaled.backward();
    }
  }
  if (scaler_) {
    scaler_->Step(*optimizer_);
    scaler_->Update();
  } else {
    optimizer_->step();
  }
  ++step_;
  return loss_sum;
}

EvalResult Trainer::Evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  at::Tensor logits;
  {
    AutocastScope autocast(c_.amp, device_.is_cuda());
    logits = model_->forward(val_.images);
  }
  logits = logits.to(at::kFloat);
  EvalResult r;
  r.loss = at::cross_entropy_loss(logits, val_.labels).item<double>();
  r.accuracy = logits.argmax(1).eq(val_.labels).to(at::kDouble).mean().item<double>();
  model_->train();
  return r;
}

// The mean over all ranks of a per-rank (sum, count); one small collective.
absl::StatusOr<double> Trainer::GlobalMean(double sum, double count) {
  std::string mine(2 * sizeof(double), '\0');
  std::memcpy(mine.data(), &sum, sizeof(double));
  std::memcpy(mine.data() + sizeof(double), &count, sizeof(double));
  SL_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      ddp::AllgatherBytes(comm_.get(), mine, {}));
  double total = 0, n = 0;
  for (const std::string& b : all) {
    double s, k;
    std::memcpy(&s, b.data(), sizeof(double));
    std::memcpy(&k, b.data() + sizeof(double), sizeof(double));
    total += s;
    n += k;
  }
  return n > 0 ? total / n : 0.0;
}

void Trainer::SaveParams() const {
  if (c_.save_params.empty() || comm_->rank() != 0) return;
  std::ofstream out(c_.save_params, std::ios::binary | std::ios::trunc);
  for (const at::Tensor& p : model_->parameters()) {
    const at::Tensor f = p.detach().to(at::kCPU, at::kFloat).contiguous();
    out.write(static_cast<const char*>(f.data_ptr()),
              static_cast<std::streamsize>(f.numel() * sizeof(float)));
  }
  if (!out) {
    throw std::runtime_error(absl::StrCat("cannot write --save-params=", c_.save_params));
  }
}

}  // namespace syncline::train
