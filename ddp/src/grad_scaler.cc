// grad_scaler.cc: dynamic loss scaling with a cross-rank found-inf flag.
#include "syncline/ddp/grad_scaler.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <utility>

#include "syncline/ddp/distributed.h"
#include "syncline/ddp/error.h"
#include "torch_interop.h"

namespace syncline::ddp {

GradScaler::GradScaler(std::shared_ptr<syncline::Communicator> comm,
                       GradScalerOptions options)
    : comm_(std::move(comm)), options_(options), scale_(options.init_scale) {
  if (options_.init_scale <= 0 || options_.growth_factor <= 1.0 ||
      options_.backoff_factor <= 0 || options_.backoff_factor >= 1.0 ||
      options_.growth_interval <= 0) {
    throw Error(absl::StatusCode::kInvalidArgument,
                "syncline::ddp::GradScaler: need init_scale > 0, growth_factor > 1, "
                "0 < backoff_factor < 1 and growth_interval > 0");
  }
}

at::Tensor GradScaler::Scale(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_;
}

bool GradScaler::AgreeOnInf(bool local_found_inf) {
  if (comm_ == nullptr || comm_->size() == 1) return local_found_inf;
  const std::vector<int64_t> flag = internal::AllreduceInt64(
      *comm_, {local_found_inf ? 1 : 0}, ReduceOp::kMax, absl::ZeroDuration(),
      "GradScaler: allreduce of the found-inf flag");
  return flag[0] != 0;
}

void GradScaler::Unscale(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  OptimizerState& state = per_optimizer_[&optimizer];
  if (state.unscaled) {
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp::GradScaler: Unscale() was already called for this "
                "optimizer since the last Update()");
  }
  // Unscale in place and collect non-finite flags without a host sync per
  // gradient; one sync at the end.
  const double inv_scale = 1.0 / scale_;
  at::Tensor nonfinite;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      at::Tensor& grad = param.mutable_grad();
      if (!grad.defined()) continue;
      grad.mul_(inv_scale);
      at::Tensor bad = at::isfinite(grad).all().logical_not();
      nonfinite = nonfinite.defined() ? nonfinite.logical_or(bad) : bad;
    }
  }
  const bool local = nonfinite.defined() && nonfinite.item<bool>();
  state.unscaled = true;
  state.found_inf = AgreeOnInf(local);
}

bool GradScaler::Step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  OptimizerState& state = per_optimizer_[&optimizer];
  if (!state.unscaled) Unscale(optimizer);
  if (per_optimizer_[&optimizer].found_inf) return false;
  optimizer.step();
  return true;
}

void GradScaler::ShadowStep() {
  if (!options_.enabled) return;
  // Contribute "no inf" and follow the others' scale schedule.
  OptimizerState& state = per_optimizer_[nullptr];
  state.unscaled = true;
  state.found_inf = AgreeOnInf(false);
  Update();
}

bool GradScaler::found_inf() const {
  for (const auto& [optimizer, state] : per_optimizer_) {
    if (state.found_inf) return true;
  }
  return false;
}

void GradScaler::Update() {
  if (!options_.enabled) return;
  if (per_optimizer_.empty()) {
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp::GradScaler: Update() without a Step() or Unscale() "
                "since the last Update()");
  }
  if (found_inf()) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  per_optimizer_.clear();
}

void GradScaler::Save(torch::serialize::OutputArchive& archive) const {
  archive.write("scale", c10::IValue(scale_));
  archive.write("growth_tracker", c10::IValue(growth_tracker_));
  archive.write("growth_factor", c10::IValue(options_.growth_factor));
  archive.write("backoff_factor", c10::IValue(options_.backoff_factor));
  archive.write("growth_interval", c10::IValue(options_.growth_interval));
}

void GradScaler::Load(torch::serialize::InputArchive& archive) {
  c10::IValue value;
  archive.read("scale", value);
  scale_ = value.toDouble();
  archive.read("growth_tracker", value);
  growth_tracker_ = value.toInt();
  archive.read("growth_factor", value);
  options_.growth_factor = value.toDouble();
  archive.read("backoff_factor", value);
  options_.backoff_factor = value.toDouble();
  archive.read("growth_interval", value);
  options_.growth_interval = value.toInt();
  per_optimizer_.clear();
}

}  // namespace syncline::ddp
