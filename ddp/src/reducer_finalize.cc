// reducer_finalize.cc: the end of a synced backward (and its shadow for a
// joined rank), plus the reducer's accessors.
//
// FinalizeBackward() runs on the autograd thread from the engine callback
// queued by the first hook of a backward. It must leave every rank having
// posted the same collectives, whatever gradients this rank saw, so that an
// unused parameter becomes an error message and never a hang.
#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "reducer.h"
#include "syncline/ddp/error.h"
#include "syncline/log.h"

namespace syncline::ddp::internal {

void Reducer::FinalizeBackward() {
  absl::MutexLock lock(&mu_);
  Record(ReducerEvent::Kind::kBackwardEnd, -1);
  if (!sync_) {
    // no_sync: gradients accumulated in .grad; `used_in_window_` remembers
    // which parameters were used in this window.
    std::fill(ready_.begin(), ready_.end(), false);
    callback_queued_ = false;
    armed_ = false;
    return;
  }
  // Buckets that never filled: fill the missing slots and launch them (in
  // order), so every rank posts every bucket.
  const bool tolerate_unused =
      options_.find_unused_parameters || (options_.static_graph && !static_known_);
  std::vector<size_t> missing;
  for (size_t b = next_bucket_; b < buckets_.size(); ++b) {
    for (size_t v : buckets_[b].vars) {
      if (ready_[v]) continue;
      if (used_in_window_[v]) {
        // Used in an earlier micro-batch of the no_sync window only.
        CopyGradIntoBucket(v);
      } else {
        ZeroSlot(v);
        if (!tolerate_unused) missing.push_back(v);
      }
      ready_[v] = true;
      MarkReadyInBucket(v);
    }
  }
  std::vector<bool> global_used(vars_.size(), true);
  try {
    LaunchReadyBuckets();
    if (NeedsUsedMap()) {
      global_used = AgreeOnUsed(used_in_window_);
    } else if (static_known_) {
      for (size_t v = 0; v < vars_.size(); ++v) global_used[v] = !static_unused_[v];
    }
    std::vector<bool> is_missing(vars_.size(), false);
    for (size_t v : missing) is_missing[v] = true;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      at::Tensor result = bucket.future.Wait();
      if (!result.defined() || result.numel() != bucket.buffer.numel() ||
          result.scalar_type() != bucket.buffer.scalar_type()) {
        throw Error(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("syncline::ddp: the comm hook's result for bucket ", b,
                                 " does not match the bucket (", bucket.buffer.numel(),
                                 " x ", c10::toString(bucket.buffer.scalar_type()), ")"));
      }
      if (!result.is_same(bucket.buffer)) bucket.buffer.copy_(result.view(-1));
      for (size_t slot = 0; slot < bucket.vars.size(); ++slot) {
        const size_t v = bucket.vars[slot];
        // A parameter unused on every rank keeps its .grad, so the
        // optimizer treats it identically everywhere.
        if (!global_used[v] || is_missing[v]) continue;
        at::Tensor& grad = vars_[v].param.mutable_grad();
        const at::Tensor& view = bucket.views[slot];
        if (options_.gradient_as_bucket_view) {
          if (!grad.defined() || grad.data_ptr() != view.data_ptr()) grad = view;
        } else if (grad.defined()) {
          grad.copy_(view);
        } else {
          grad = view.clone();
        }
      }
      Record(ReducerEvent::Kind::kBucketDone, static_cast<int64_t>(b));
    }
  } catch (const std::exception& e) {
    ReportThrown(e);
    ResetIteration(/*after_error=*/true);
    throw;
  } catch (...) {
    ResetIteration(/*after_error=*/true);
    throw;
  }
  if (!missing.empty()) {
    std::string names;
    for (size_t v : missing) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", "'", vars_[v].name, "' (#",
                      vars_[v].module_index, ")");
    }
    pending_error_ = absl::StrCat(
        "syncline::ddp: rank ", comm_->rank(), ": in the previous iteration ",
        missing.size(), " parameter(s) got no gradient: ", names,
        ". Their buckets were reduced with zeros for them so that no rank "
        "hangs, and their .grad was left as it was. If the model does not use "
        "every parameter in every iteration, set "
        "DdpOptions::find_unused_parameters = true; otherwise make the loss "
        "depend on them, or set requires_grad(false) on them before wrapping.");
    SL_LOG(ERROR, "%s", pending_error_);
  }
  if (options_.static_graph && !static_known_) {
    for (size_t v = 0; v < vars_.size(); ++v) static_unused_[v] = !global_used[v];
    static_known_ = true;
  }
  had_synced_backward_ = true;
  record_order_ = false;
  ResetIteration();
}

void Reducer::ShadowBackward() {
  absl::MutexLock lock(&mu_);
  try {
    for (Bucket& bucket : buckets_) bucket.buffer.zero_();
    for (size_t b = 0; b < buckets_.size(); ++b) Launch(b);
    std::vector<bool> global_used(vars_.size(), true);
    if (NeedsUsedMap()) {
      global_used = AgreeOnUsed(std::vector<bool>(vars_.size(), false));
    }
    for (Bucket& bucket : buckets_) bucket.future.Wait();
    if (options_.static_graph && !static_known_) {
      for (size_t v = 0; v < vars_.size(); ++v) static_unused_[v] = !global_used[v];
      static_known_ = true;
    }
  } catch (const std::exception& e) {
    ReportThrown(e);
    ResetIteration(/*after_error=*/true);
    throw;
  } catch (...) {
    ResetIteration(/*after_error=*/true);
    throw;
  }
  had_synced_backward_ = true;
  record_order_ = false;
  ResetIteration();
}

std::vector<BucketInfo> Reducer::buckets() const {
  absl::MutexLock lock(&mu_);
  std::vector<BucketInfo> out;
  for (const Bucket& bucket : buckets_) {
    BucketInfo info;
    for (size_t v : bucket.vars) {
      info.param_indices.push_back(vars_[v].module_index);
      info.param_names.push_back(vars_[v].name);
    }
    info.dtype = bucket.buffer.scalar_type();
    info.device = bucket.buffer.device();
    info.numel = bucket.buffer.numel();
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<ReducerEvent> Reducer::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

bool Reducer::rebuilt() const {
  absl::MutexLock lock(&mu_);
  return rebuilt_;
}

}  // namespace syncline::ddp::internal
