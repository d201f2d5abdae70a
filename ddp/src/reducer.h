// reducer.h: the gradient reducer behind DistributedDataParallel (private to
// libsyncline_ddp). See distributed.h for the bucket lifecycle.
//
// Threading: the training thread calls the constructor, PrepareForward(),
// ShadowBackward(), SetCommHook() and the accessors. OnGradReady() runs on
// the autograd thread from grad-accumulator post-hooks; FinalizeBackward()
// runs on the autograd thread from the engine's end-of-backward callback.
// All state is guarded by mu_. Comm hooks run with mu_ held.
#ifndef SYNCLINE_DDP_SRC_REDUCER_H_
#define SYNCLINE_DDP_SRC_REDUCER_H_

#include <ATen/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "bucket_layout.h"
#include "syncline/communicator.h"
#include "syncline/ddp/comm_hooks.h"
#include "syncline/ddp/distributed.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace syncline::ddp::internal {

// One parameter that requires grad ("variable").
struct ReducerVar {
  at::Tensor param;
  std::string name;          // e.g. "fc1.weight"
  int64_t module_index = 0;  // index in the module's named_parameters()
};

class Reducer {
 public:
  Reducer(std::vector<ReducerVar> vars, std::shared_ptr<syncline::Communicator> comm,
          const DdpOptions& options);
  // Removes the hooks; waits for any bucket still in flight.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Throws the previous iteration's error, rebuilds the buckets once after
  // the first synced backward (collective, when `sync`), and arms the next
  // backward. Not called for a forward with grad mode off.
  void PrepareForward(bool sync);

  // Join, for a rank with no data: PrepareShadow() mirrors PrepareForward()
  // of an iteration outside no_sync (the rebuild, if due); ShadowBackward()
  // posts the collectives of one synced backward with zero gradients.
  void PrepareShadow();
  void ShadowBackward();

  void SetCommHook(CommHook hook);
  // Tells whether a NoSyncGuard is alive now; read when a backward starts to
  // warn when it disagrees with the forward (no_sync_mismatch pitfall).
  void SetNoSyncProbe(std::function<bool()> probe);
  std::vector<BucketInfo> buckets() const;
  std::vector<ReducerEvent> events() const;
  bool rebuilt() const;

 private:
  struct Bucket {
    std::vector<size_t> vars;
    std::vector<at::Tensor> views;  // into buffer, shaped like the params
    at::Tensor buffer;              // flat, contiguous
    size_t pending = 0;             // variables not yet ready
    CommFuture future;
    bool launched = false;
  };
  class PostHook;

  void OnGradReady(size_t var);
  void FinalizeBackward();

  void InstallLayout(const BucketLayout& layout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RebuildIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `after_error`: an error of this iteration is being (or was) thrown to
  // the caller, so buckets that fail while they are drained are that same
  // failure or its consequences, and are not reported again.
  void ResetIteration(bool after_error = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs `e` once, at the point where a backward throws it.
  void ReportThrown(const std::exception& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CopyGradIntoBucket(size_t var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ZeroSlot(size_t var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkReadyInBucket(size_t var) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchReadyBuckets() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Launch(size_t bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts the used-map allreduce when needed; returns per-var global use.
  std::vector<bool> AgreeOnUsed(const std::vector<bool>& used)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NeedsUsedMap() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WaitInFlight(bool after_error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Record(ReducerEvent::Kind kind, int64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<LayoutVar> LayoutVars() const;

  const std::vector<ReducerVar> vars_;
  const std::shared_ptr<syncline::Communicator> comm_;
  const DdpOptions options_;
  // Keeps the accumulators (and so our hooks) alive; a variable only holds
  // its accumulator weakly.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  mutable absl::Mutex mu_;
  CommHook hook_ ABSL_GUARDED_BY(mu_);
  std::function<bool()> no_sync_probe_ ABSL_GUARDED_BY(mu_);
  std::vector<Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> var_bucket_ ABSL_GUARDED_BY(mu_);  // var -> bucket
  std::vector<size_t> var_slot_ ABSL_GUARDED_BY(mu_);    // var -> slot in it
  size_t next_bucket_ ABSL_GUARDED_BY(mu_) = 0;          // next bucket to launch

  // Per iteration / window.
  bool armed_ ABSL_GUARDED_BY(mu_) = false;  // PrepareForward seen
  bool sync_ ABSL_GUARDED_BY(mu_) = true;    // this backward reduces
  bool callback_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> ready_ ABSL_GUARDED_BY(mu_);  // in this backward
  // Got a gradient in some backward since the last synced one (no_sync).
  std::vector<bool> used_in_window_ ABSL_GUARDED_BY(mu_);
  std::string pending_error_ ABSL_GUARDED_BY(mu_);
  std::vector<ReducerEvent> events_ ABSL_GUARDED_BY(mu_);

  // Rebuild after the first synced backward.
  std::vector<size_t> ready_order_ ABSL_GUARDED_BY(mu_);
  bool record_order_ ABSL_GUARDED_BY(mu_) = true;
  bool had_synced_backward_ ABSL_GUARDED_BY(mu_) = false;
  bool rebuilt_ ABSL_GUARDED_BY(mu_) = false;

  // static_graph: the globally unused variables, known after iteration 1.
  bool static_known_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> static_unused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_REDUCER_H_
