// grad_scaler.h: dynamic loss scaling for f16 training, consistent across
// ranks.
//
// The loss is multiplied by a scale before backward so small f16 gradients
// do not flush to zero. Before the optimizer step the gradients are divided
// by the scale and checked for inf/NaN. The found-inf flag is allreduced
// (MAX) across ranks, so if any rank overflowed, every rank skips the step
// and backs off its scale: the replicas and their scales stay identical.
// After `growth_interval` clean steps in a row the scale grows.
//
// Example (one optimizer):
//   GradScaler scaler(comm);
//   for (...) {
//     opt.zero_grad();
//     auto loss = ...;
//     scaler.Scale(loss).backward();
//     scaler.Unscale(opt);             // optional: e.g. to clip gradients
//     bool stepped = scaler.Step(opt);  // false: skipped on every rank
//     scaler.Update();
//   }
//
// Collective: Unscale() (or Step() when Unscale() was not called) issues one
// allreduce per optimizer per iteration; call it at the same point on every
// rank. A rank that finished its data inside DistributedDataParallel::Join()
// mirrors it with ShadowStep().
// Threading: not thread-safe; use from the training thread.
#ifndef SYNCLINE_DDP_GRAD_SCALER_H_
#define SYNCLINE_DDP_GRAD_SCALER_H_

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>

#include "syncline/communicator.h"

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
  // Disabled: Scale() returns the loss, Step() always steps, no collectives.
  bool enabled = true;
};

class GradScaler {
 public:
  // `comm` may be null for single-process use (no allreduce then).
  explicit GradScaler(std::shared_ptr<syncline::Communicator> comm,
                      GradScalerOptions options = {});

  // Scale()
  //
  // loss * scale, in the loss's dtype: compute the loss in f32 (an f16 loss
  // times 65536 overflows).
  at::Tensor Scale(const at::Tensor& loss) const;

  // Unscale()
  //
  // Divides every gradient of `optimizer` by the scale in place, and decides
  // (collectively) whether any rank found an inf or NaN. At most once per
  // optimizer between Update() calls (a second call throws).
  void Unscale(torch::optim::Optimizer& optimizer);

  // Step()
  //
  // Unscales if not done yet, then steps the optimizer unless some rank found
  // an inf/NaN. Returns whether it stepped; the same on every rank.
  bool Step(torch::optim::Optimizer& optimizer);

  // ShadowStep()
  //
  // For a rank with no gradients of its own (joined): the collective part of
  // Unscale(), contributing "no inf", followed by Update(), so that its scale
  // keeps following the other ranks'.
  void ShadowStep();

  // Update()
  //
  // Backs off the scale if the iteration found an inf (on any rank), else
  // counts a clean step and grows the scale every `growth_interval` of them.
  // Resets the per-iteration state.
  void Update();

  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool enabled() const { return options_.enabled; }
  // Whether the last unscaled iteration found an inf/NaN on any rank.
  bool found_inf() const;

  // Save() / Load()
  //
  // Checkpoint the scale, growth tracker and options (keys "scale",
  // "growth_tracker", "growth_factor", "backoff_factor", "growth_interval").
  void Save(torch::serialize::OutputArchive& archive) const;
  void Load(torch::serialize::InputArchive& archive);

 private:
  struct OptimizerState {
    bool unscaled = false;
    bool found_inf = false;
  };

  // Allreduces (MAX) the local flag; returns the global one.
  bool AgreeOnInf(bool local_found_inf);

  std::shared_ptr<syncline::Communicator> comm_;
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  std::map<const torch::optim::Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_GRAD_SCALER_H_
