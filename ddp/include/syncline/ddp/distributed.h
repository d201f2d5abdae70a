// distributed.h: DistributedDataParallel for libtorch modules.
//
// Wraps any torch::nn::Module and a syncline::Communicator. Every rank holds
// a full replica; after each synced backward every parameter's `.grad` holds
// the mean of the ranks' gradients, so an identical optimizer step keeps the
// replicas identical.
//
// Bucket lifecycle (one synced iteration):
//   1. PrepareForward() arms the reducer (and broadcasts buffers).
//   2. During backward, a post-hook on each parameter's grad accumulator marks
//      the parameter ready and copies its gradient into its bucket (or, with
//      gradient_as_bucket_view, the gradient already lives there).
//   3. When every parameter of a bucket is ready, and every earlier bucket
//      has been launched, the bucket's comm hook starts its allreduce at once,
//      while backward continues. Buckets launch in index order on every rank.
//   4. A callback queued once per backward on the autograd engine runs when
//      backward ends: it launches buckets that never filled (unused
//      parameters), waits for every bucket in order, and writes the averaged
//      gradients into `.grad`.
// Buckets group parameters by dtype and device and start in reverse
// parameter order with a small first bucket. At the first PrepareForward()
// outside NoSync() after the first synced backward they are rebuilt once, in
// the order in which gradients actually became ready on rank 0; rank 0
// broadcasts that layout.
//
// Errors: every error is a syncline::ddp::Error (error.h), a c10::Error
// that carries the absl::StatusCode and the core's message: the op, its
// sequence number and the ranks involved.
//
// Threading: construct and call PrepareForward()/NoSync()/Join()/
// RegisterCommHook() from one thread, the training thread. Autograd hooks and
// the end-of-backward callback run on the autograd thread (the thread that
// calls backward() for CPU tensors, a device thread for CUDA); the reducer's
// state is guarded by a mutex. Within an iteration the collectives follow
// one fixed sequence (PrepareForward's, then the buckets in index order, then
// the end-of-backward ones), so every rank posts them in the same order.
// CUDA tensors are posted on the default stream (BufferView::stream null).
//
// Not supported: sparse gradients, a second backward over one forward, and
// reentrant backward (activation checkpointing); each is an error.
//
// Example (run under `syncline-run -n 4 ./train`):
//   std::shared_ptr<syncline::Communicator> comm = syncline::ddp::ThrowIfError(
//       syncline::Communicator::Create({}), "connect");
//   Net net;  // TORCH_MODULE(Net)
//   syncline::ddp::DistributedDataParallel ddp(net.ptr(), comm);
//   torch::optim::SGD opt(net->parameters(), 0.1);
//   for (auto& [x, y] : my_shard) {
//     opt.zero_grad();
//     auto loss = torch::mse_loss(ddp.Forward(net, x), y);
//     loss.backward();   // gradients are averaged across ranks here
//     opt.step();
//   }
#ifndef SYNCLINE_DDP_DISTRIBUTED_H_
#define SYNCLINE_DDP_DISTRIBUTED_H_

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "syncline/communicator.h"
#include "syncline/ddp/comm_hooks.h"
#include "syncline/ddp/error.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

namespace internal {
class Reducer;
}  // namespace internal

// ReductionOptions
//
// How the default hook turns the ranks' gradients into their mean, so that
// f16/bf16 gradients do not overflow while summing N of them.
//   result = (sum_r g_r / pre) * (pre / world)       (post_divide = true)
//   result =  sum_r g_r / pre                        (post_divide = false)
struct ReductionOptions {
  // Dtype the sum is carried out in, e.g. torch::kFloat for f16/bf16
  // gradients. Unset: the gradients' own dtype, or f32 when the backend
  // cannot reduce that dtype.
  std::optional<c10::ScalarType> reduce_dtype;
  // Divide each rank's gradient by this before the sum. 0 = auto: sqrt(world)
  // for f16/bf16 reduced in their own dtype, 1 otherwise (sum in a wide
  // dtype, then divide once). Use world_size to divide fully up front.
  double pre_divide_factor = 0;
  // Divide by world / pre after the sum so the result is the mean. Turn off
  // only to get sum / pre (e.g. pre = 1: the plain sum).
  bool post_divide = true;
};

// DdpOptions
//
// One struct of named options for the wrapper.
struct DdpOptions {
  // Later buckets hold about this many MiB of gradients.
  double bucket_cap_mb = 25;
  // The first bucket (per dtype and device) is small so its allreduce can
  // start early in backward.
  double first_bucket_mb = 1;
  // Broadcast the module's buffers (e.g. BatchNorm statistics) from rank 0 at
  // every PrepareForward() outside NoSync() with grad mode on.
  bool broadcast_buffers = true;
  // Tolerate parameters that get no gradient in an iteration: they are
  // reduced as zeros, and a parameter unused on every rank keeps its `.grad`
  // untouched. Costs one small allreduce per synced iteration. Without it, a
  // parameter that got no gradient is an error naming it.
  bool find_unused_parameters = false;
  // Make each `.grad` a view into its bucket: saves two copies per
  // gradient and step (into the bucket after backward, back out after the
  // allreduce: 2 x 48 MiB per step on bench/ddp_step's MLP) and the memory
  // of the gradients. On by default (PyTorch's DDP defaults to off): the
  // results are the same, as the equivalence tests check for both settings.
  // Set it false where code needs `.grad` to be a tensor of its own (e.g.
  // one that calls `.grad.detach_()` or keeps `.grad` across steps expecting
  // the next allreduce not to change it).
  bool gradient_as_bucket_view = true;
  // The set of used parameters does not change across iterations. The first
  // iteration finds the unused ones (as find_unused_parameters does); later
  // iterations mark them ready up front and skip the extra allreduce.
  bool static_graph = false;
  // How the default comm hook averages gradients.
  ReductionOptions reduction;
  // Deadline of DDP's own blocking collectives (construction checks,
  // broadcasts, join handshakes, the used-parameter map); 0: the
  // communicator's default. Bucket allreduces posted by comm hooks use the
  // communicator's default.
  absl::Duration timeout = absl::ZeroDuration();
};

// BucketInfo
//
// One bucket of the current layout, for tests and diagnostics.
struct BucketInfo {
  std::vector<int64_t> param_indices;    // into named_parameters() order
  std::vector<std::string> param_names;  // e.g. "fc1.weight"
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  int64_t numel = 0;
};

// ReducerEvent
//
// What the reducer did, in order, during the last iteration (cleared at every
// PrepareForward()). Tests use it to prove that a bucket's allreduce started
// while backward was still running.
struct ReducerEvent {
  enum class Kind {
    kGradReady,       // a parameter's gradient became ready (`index` = param)
    kBucketLaunched,  // a bucket's comm hook was started (`index` = bucket)
    kBackwardEnd,     // the end-of-backward callback started
    kBucketDone,      // a bucket's result was written back (`index` = bucket)
  };
  Kind kind;
  int64_t index = -1;
};

// JoinOptions
//
// See DistributedDataParallel::Join().
struct JoinOptions {
  // Called on a rank that ran out of data once per shadowed iteration that
  // synced gradients, after the gradient collectives. Use it to mirror any
  // other collective the training loop issues per synced iteration (e.g.
  // GradScaler::ShadowStep()).
  std::function<void()> on_shadow_iteration;
};

class DistributedDataParallel {
 public:
  // Checks that parameter count, shapes and dtypes match on every rank (a
  // mismatch throws on every rank, naming the first differing parameter and
  // the ranks that differ), broadcasts parameters and buffers from rank 0,
  // builds the buckets and registers the grad-accumulator hooks. Collective:
  // every rank must construct its wrapper at the same point.
  // Parameters with requires_grad == false are broadcast but not reduced.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                          std::shared_ptr<syncline::Communicator> comm,
                          DdpOptions options = {});
  // Removes the hooks. Waits for collectives still in flight.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // PrepareForward()
  //
  // Call before each forward that will be followed by backward. Throws the
  // error of the previous iteration if it had one (e.g. a parameter that got
  // no gradient). Records whether this iteration syncs: inside NoSync() it
  // does not, and then it communicates nothing. Otherwise it rebuilds the
  // buckets once after the first synced iteration, broadcasts buffers
  // (broadcast_buffers) and, every SYNCLINE_CHECK_EVERY synced iterations,
  // compares the replicas. Collective on every rank in the same iteration.
  //
  // With grad mode off (torch::NoGradGuard, e.g. evaluation) it does nothing
  // at all: no collective, no buffer broadcast, no replica check, and the
  // reducer stays as it was (an iteration already prepared stays armed). The
  // forward uses this rank's own buffers as they are. So any subset of ranks
  // may evaluate, any number of times, between training iterations; a module
  // in train() mode still updates its local buffers (e.g. BatchNorm running
  // statistics), and the next synced forward overwrites them with rank 0's.
  void PrepareForward();

  // Forward()
  //
  // PrepareForward(), then holder->forward(args...). `holder` is the module
  // (a ModuleHolder such as `Net`, or a shared_ptr to the Impl), and must be
  // the one that was wrapped: another module's gradients would never be
  // averaged, so it throws Error (kInvalidArgument) before anything runs.
  template <typename ModuleHolder, typename... Args>
  auto Forward(ModuleHolder& holder, Args&&... args) {
    CheckIsWrapped(static_cast<const torch::nn::Module*>(&*holder));
    PrepareForward();
    return holder->forward(std::forward<Args>(args)...);
  }

  // NoSyncGuard
  //
  // While one is alive, PrepareForward() marks iterations as local: backward
  // accumulates gradients in `.grad` without any communication. The first
  // synced backward after it reduces the accumulated sum once, so N
  // micro-batches give the gradient of one N times larger batch. With
  // find_unused_parameters, a parameter used in any micro-batch of the window
  // counts as used. Move-only; must not outlive the wrapper.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel* ddp);
    ~NoSyncGuard();
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard NoSync();

  // JoinGuard
  //
  // Uneven inputs. Open one around the training loop on every rank:
  //   { auto join = ddp.Join();
  //     for (auto& batch : my_uneven_shard) { ...forward/backward/step... }
  //     join.Finish(); }
  // Inside it, each PrepareForward() runs a tiny allreduce that counts the
  // ranks still training. A rank whose loop ended calls Finish(), which
  // shadows the others' iterations (the same collectives, with zero
  // gradients) until every rank has finished, so nobody hangs. Gradients are
  // still divided by the full world size, so a finished rank counts as a
  // zero gradient. The destructor calls Finish() if needed and logs (does
  // not throw) an error; call Finish() to see errors as exceptions.
  class JoinGuard {
   public:
    JoinGuard(DistributedDataParallel* ddp, JoinOptions options);
    ~JoinGuard();
    JoinGuard(JoinGuard&& other) noexcept;
    JoinGuard(const JoinGuard&) = delete;
    JoinGuard& operator=(const JoinGuard&) = delete;
    JoinGuard& operator=(JoinGuard&&) = delete;
    // Shadows until all ranks have finished. Returns the number of
    // iterations this rank shadowed. Throws on a collective error.
    int64_t Finish();

   private:
    DistributedDataParallel* ddp_;
    JoinOptions options_;
    bool finished_ = false;
    // Not shadowing while an exception unwinds the training loop.
    int uncaught_at_start_ = 0;
  };
  [[nodiscard]] JoinGuard Join(JoinOptions options = {});

  // RegisterCommHook()
  //
  // Replaces the default AllreduceHook(options.reduction). Call between
  // iterations, identically on every rank. See comm_hooks.h.
  void RegisterCommHook(CommHook hook);

  // The current bucket layout, in launch order.
  std::vector<BucketInfo> buckets() const;
  // The reducer's events since the last PrepareForward().
  std::vector<ReducerEvent> events() const;
  // Whether the buckets have been rebuilt from the observed ready order.
  bool buckets_rebuilt() const;

  torch::nn::Module& module() { return *module_; }
  const std::shared_ptr<syncline::Communicator>& communicator() const { return comm_; }
  const DdpOptions& options() const { return options_; }

 private:
  // Throws Error (kInvalidArgument) naming both modules unless `module` is the
  // wrapped one.
  void CheckIsWrapped(const torch::nn::Module* module) const;
  void BroadcastStateFromRank0();
  void BroadcastBuffers();
  // One iteration of a finished rank inside Join(); returns false when every
  // rank has finished.
  bool ShadowIteration(const JoinOptions& options);
  // The join handshake; every field counts ranks.
  struct JoinCounts {
    int active = 0;      // still training
    int window_end = 0;  // not inside NoSync(): buffers, rebuild
    int grad_sync = 0;   // and a synced backward follows
  };
  JoinCounts JoinHandshake(const JoinCounts& mine);

  std::shared_ptr<torch::nn::Module> module_;
  std::shared_ptr<syncline::Communicator> comm_;
  DdpOptions options_;
  std::unique_ptr<internal::Reducer> reducer_;
  // A NoSyncGuard is alive. Atomic: the autograd thread reads it when a
  // backward starts (the no_sync_mismatch pitfall check).
  std::atomic<bool> no_sync_{false};
  bool in_join_ = false;  // a JoinGuard is alive
  // The replica_drift pitfall check (SYNCLINE_CHECK_EVERY).
  std::vector<at::Tensor> params_;
  std::vector<std::string> param_names_;
  int64_t synced_iterations_ = 0;  // PrepareForward()s outside NoSync() and Join()
  int64_t check_every_ = 0;
};

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_DISTRIBUTED_H_
