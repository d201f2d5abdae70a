// reducer.cc: buckets, grad-accumulator hooks and the end-of-backward
// callback. See reducer.h for the threading model.
#include "reducer.h"

#include <ATen/ATen.h>
#include <c10/util/strides.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pitfall_checks.h"
#include "syncline/ddp/error.h"
#include "syncline/log.h"
#include "torch_interop.h"

namespace syncline::ddp::internal {
namespace {

int64_t MbToBytes(double mb) {
  return std::max<int64_t>(1, static_cast<int64_t>(mb * 1024.0 * 1024.0));
}

// True if `grad` already is `view` (not merely some alias of the bucket).
bool IsSameView(const at::Tensor& grad, const at::Tensor& view) {
  return grad.defined() && grad.data_ptr() == view.data_ptr() &&
         grad.sizes() == view.sizes() && grad.strides() == view.strides() &&
         grad.scalar_type() == view.scalar_type();
}

// A tensor of `sizes` over buffer[offset:]. Made with set_() rather than a
// view op so autograd does not see a view: the optimizers' zero_grad()
// calls detach_() on gradients, which is an error on views.
at::Tensor AliasInto(const at::Tensor& buffer, int64_t offset, at::IntArrayRef sizes) {
  at::Tensor alias = at::empty({0}, buffer.options());
  alias.set_(buffer.storage(), buffer.storage_offset() + offset, sizes,
             c10::contiguous_strides(sizes));
  return alias;
}

}  // namespace

// Runs after AccumulateGrad has written the parameter's `.grad`.
class Reducer::PostHook : public torch::autograd::FunctionPostHook {
 public:
  PostHook(Reducer* reducer, size_t var) : reducer_(reducer), var_(var) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->OnGradReady(var_);
    return outputs;
  }

 private:
  Reducer* reducer_;  // outlives the hook: ~Reducer removes it
  size_t var_;
};

Reducer::Reducer(std::vector<ReducerVar> vars,
                 std::shared_ptr<syncline::Communicator> comm, const DdpOptions& options)
    : vars_(std::move(vars)), comm_(std::move(comm)), options_(options) {
  absl::MutexLock lock(&mu_);
  hook_ = AllreduceHook(options_.reduction);
  const size_t n = vars_.size();
  ready_.assign(n, false);
  used_in_window_.assign(n, false);
  static_unused_.assign(n, false);
  InstallLayout(ComputeBucketLayout(LayoutVars(), CompleteOrder({}, n),
                                    MbToBytes(options_.first_bucket_mb),
                                    MbToBytes(options_.bucket_cap_mb)));
  for (size_t v = 0; v < n; ++v) {
    std::shared_ptr<torch::autograd::Node> acc =
        torch::autograd::impl::grad_accumulator(vars_[v].param);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<PostHook>(this, v)));
    accumulators_.push_back(std::move(acc));
  }
}

Reducer::~Reducer() {
  absl::MutexLock lock(&mu_);
  WaitInFlight(/*after_error=*/callback_queued_);
  for (size_t v = 0; v < accumulators_.size(); ++v) {
    accumulators_[v]->del_post_hook(hook_keys_[v]);
  }
}

std::vector<LayoutVar> Reducer::LayoutVars() const {
  std::vector<LayoutVar> out;
  for (const ReducerVar& v : vars_) {
    out.push_back({v.param.scalar_type(), v.param.device(),
                   v.param.numel() * static_cast<int64_t>(v.param.element_size())});
  }
  return out;
}

void Reducer::InstallLayout(const BucketLayout& layout) {
  std::vector<Bucket> buckets(layout.size());
  var_bucket_.assign(vars_.size(), 0);
  var_slot_.assign(vars_.size(), 0);
  for (size_t b = 0; b < layout.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.vars = layout[b];
    int64_t numel = 0;
    for (size_t v : bucket.vars) numel += vars_[v].param.numel();
    const at::Tensor& first = vars_[bucket.vars.front()].param;
    bucket.buffer = at::zeros(
        {numel}, at::TensorOptions().dtype(first.scalar_type()).device(first.device()));
    int64_t offset = 0;
    for (size_t slot = 0; slot < bucket.vars.size(); ++slot) {
      const size_t v = bucket.vars[slot];
      const at::Tensor& param = vars_[v].param;
      at::Tensor view = AliasInto(bucket.buffer, offset, param.sizes());
      offset += param.numel();
      // Keep accumulated gradients (no_sync, or a rebuild in view mode).
      at::Tensor& grad = param.mutable_grad();
      if (options_.gradient_as_bucket_view && grad.defined()) {
        view.copy_(grad);
        grad = view;
      }
      bucket.views.push_back(std::move(view));
      var_bucket_[v] = b;
      var_slot_[v] = slot;
    }
    bucket.pending = bucket.vars.size();
  }
  buckets_ = std::move(buckets);
  next_bucket_ = 0;
}

void Reducer::RebuildIfDue() {
  if (rebuilt_ || !had_synced_backward_) return;
  std::vector<int64_t> encoded;
  if (comm_->rank() == 0) {
    encoded = EncodeLayout(ComputeBucketLayout(
        LayoutVars(), CompleteOrder(ready_order_, vars_.size()),
        MbToBytes(options_.first_bucket_mb), MbToBytes(options_.bucket_cap_mb)));
  }
  encoded = BroadcastInt64(*comm_, std::move(encoded), /*root=*/0, options_.timeout,
                           "broadcast of the rebuilt bucket layout");
  InstallLayout(DecodeLayout(encoded, LayoutVars()));
  rebuilt_ = true;
  record_order_ = false;
  ready_order_.clear();
}

void Reducer::PrepareForward(bool sync) {
  absl::MutexLock lock(&mu_);
  if (!pending_error_.empty()) {
    std::string error = std::move(pending_error_);
    pending_error_.clear();
    ResetIteration();
    throw Error(absl::StatusCode::kFailedPrecondition, error);
  }
  if (callback_queued_) {
    // The previous backward threw (e.g. a failed collective) before its
    // end-of-backward callback ran: start clean.
    ResetIteration(/*after_error=*/true);
  }
  // Inside no_sync nothing is communicated; the rebuild waits for the
  // window's synced iteration.
  if (sync) RebuildIfDue();
  events_.clear();
  armed_ = true;
  sync_ = sync;
}

void Reducer::PrepareShadow() {
  absl::MutexLock lock(&mu_);
  pending_error_.clear();
  RebuildIfDue();
  events_.clear();
  armed_ = false;
}

void Reducer::SetCommHook(CommHook hook) {
  absl::MutexLock lock(&mu_);
  if (callback_queued_) {
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp: RegisterCommHook() called during backward");
  }
  hook_ = std::move(hook);
}

void Reducer::SetNoSyncProbe(std::function<bool()> probe) {
  absl::MutexLock lock(&mu_);
  no_sync_probe_ = std::move(probe);
}

void Reducer::Record(ReducerEvent::Kind kind, int64_t index) {
  events_.push_back(ReducerEvent{kind, index});
}

void Reducer::OnGradReady(size_t var) {
  absl::MutexLock lock(&mu_);
  if (!armed_) {
    throw Error(
        absl::StatusCode::kFailedPrecondition,
        absl::StrCat(
            "syncline::ddp: rank ", comm_->rank(), ": the gradient of '", vars_[var].name,
            "' was computed, but PrepareForward() was not called since the last "
            "backward. Call ddp.PrepareForward() (or ddp.Forward()) before every "
            "forward whose backward should be reduced; a second backward over "
            "one forward is not supported."));
  }
  if (!callback_queued_) {
    // Once per backward: the engine runs it after the last node.
    callback_queued_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback(
        [this] { FinalizeBackward(); });
    if (no_sync_probe_) CheckNoSyncMismatch(comm_->rank(), sync_, no_sync_probe_());
    if (sync_ && static_known_) {
      // static_graph: parameters unused in iteration 1 are ready from the
      // start, so their buckets do not wait for the end of backward.
      for (size_t v = 0; v < vars_.size(); ++v) {
        if (!static_unused_[v]) continue;
        ZeroSlot(v);
        ready_[v] = true;
        MarkReadyInBucket(v);
      }
      LaunchReadyBuckets();
    }
  }
  Record(ReducerEvent::Kind::kGradReady, vars_[var].module_index);
  if (ready_[var]) {
    const bool static_unused = static_known_ && static_unused_[var];
    throw Error(absl::StatusCode::kFailedPrecondition,
                absl::StrCat("syncline::ddp: rank ", comm_->rank(), ": parameter '",
                             vars_[var].name, "' got a gradient twice in one backward",
                             static_unused
                                 ? " (static_graph is on and it was unused in the first "
                                   "iteration: the graph is not static)"
                                 : " (reentrant backward, e.g. activation checkpointing, "
                                   "is not supported)"));
  }
  ready_[var] = true;
  used_in_window_[var] = true;
  if (record_order_) ready_order_.push_back(var);
  if (!sync_) return;  // no_sync: the gradient stays in .grad
  CopyGradIntoBucket(var);
  MarkReadyInBucket(var);
  LaunchReadyBuckets();
}

void Reducer::CopyGradIntoBucket(size_t var) {
  at::Tensor& grad = vars_[var].param.mutable_grad();
  at::Tensor& view = buckets_[var_bucket_[var]].views[var_slot_[var]];
  if (!grad.defined()) {
    view.zero_();
    return;
  }
  if (grad.is_sparse()) {
    throw Error(
        absl::StatusCode::kUnimplemented,
        absl::StrCat("syncline::ddp: parameter '", vars_[var].name,
                     "' has a sparse gradient; sparse gradients are not supported"));
  }
  if (options_.gradient_as_bucket_view) {
    if (!IsSameView(grad, view)) {
      view.copy_(grad);
      grad = view;
    }
  } else {
    view.copy_(grad);
  }
}

void Reducer::ZeroSlot(size_t var) {
  buckets_[var_bucket_[var]].views[var_slot_[var]].zero_();
}

void Reducer::MarkReadyInBucket(size_t var) {
  Bucket& bucket = buckets_[var_bucket_[var]];
  if (bucket.pending > 0) --bucket.pending;
}

void Reducer::LaunchReadyBuckets() {
  // Strictly in index order, so every rank posts the same sequence.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Launch(next_bucket_++);
  }
}

void Reducer::Launch(size_t b) {
  Bucket& bucket = buckets_[b];
  Record(ReducerEvent::Kind::kBucketLaunched, static_cast<int64_t>(b));
  std::vector<int64_t> indices;
  for (size_t v : bucket.vars) indices.push_back(vars_[v].module_index);
  GradBucket grad_bucket(b, buckets_.size(), bucket.buffer, bucket.views,
                         std::move(indices), comm_->size());
  bucket.future = hook_(grad_bucket, *comm_);
  bucket.launched = true;
}

bool Reducer::NeedsUsedMap() const {
  return options_.find_unused_parameters || (options_.static_graph && !static_known_);
}

std::vector<bool> Reducer::AgreeOnUsed(const std::vector<bool>& used) {
  std::vector<int64_t> flags(used.begin(), used.end());
  flags = AllreduceInt64(*comm_, std::move(flags), ReduceOp::kMax, options_.timeout,
                         "allreduce of the used-parameter map");
  return std::vector<bool>(flags.begin(), flags.end());
}

void Reducer::WaitInFlight(bool after_error) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    if (!bucket.launched || !bucket.future.valid()) continue;
    try {
      bucket.future.Wait();
    } catch (const std::exception& e) {
      if (after_error) {
        SL_LOG(DEBUG, "syncline::ddp: bucket %d also failed: %s", b, e.what());
      } else {
        // Nobody waited for it and nothing was thrown: the only report.
        SL_LOG(WARN,
               "syncline::ddp: the allreduce of gradient bucket %d failed after its "
               "backward was abandoned; its gradients were not averaged: %s",
               b, e.what());
      }
    }
  }
}

void Reducer::ReportThrown(const std::exception& e) {
  SL_LOG(ERROR, "syncline::ddp: backward() throws: %s", e.what());
}

void Reducer::ResetIteration(bool after_error) {
  WaitInFlight(after_error);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.vars.size();
    bucket.launched = false;
    bucket.future = CommFuture();
  }
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(used_in_window_.begin(), used_in_window_.end(), false);
  callback_queued_ = false;
  armed_ = false;
}

}  // namespace syncline::ddp::internal
