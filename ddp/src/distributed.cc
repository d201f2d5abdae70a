// distributed.cc: DistributedDataParallel, its NoSync and Join guards.
#include "syncline/ddp/distributed.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/module.h>

#include <exception>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pitfall_checks.h"
#include "reducer.h"
#include "replica_check.h"
#include "syncline/ddp/error.h"
#include "syncline/log.h"
#include "torch_interop.h"

namespace syncline::ddp {

DistributedDataParallel::DistributedDataParallel(
    std::shared_ptr<torch::nn::Module> module,
    std::shared_ptr<syncline::Communicator> comm, DdpOptions options)
    : module_(std::move(module)), comm_(std::move(comm)), options_(std::move(options)) {
  if (module_ == nullptr || comm_ == nullptr) {
    throw Error(absl::StatusCode::kInvalidArgument,
                "syncline::ddp: DistributedDataParallel needs a module and a "
                "communicator");
  }
  // Parameters in module order, without duplicates (a tensor shared by two
  // submodules is reduced once).
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::unordered_set<const void*> seen;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    names.push_back(item.key());
    params.push_back(item.value());
  }
  internal::VerifyReplicas(*comm_, params, names, options_.timeout);
  BroadcastStateFromRank0();

  std::vector<internal::ReducerVar> vars;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    vars.push_back({params[i], names[i], static_cast<int64_t>(i)});
  }
  reducer_ = std::make_unique<internal::Reducer>(std::move(vars), comm_, options_);
  reducer_->SetNoSyncProbe([this] { return no_sync_.load(); });
  internal::CheckConstructionPitfalls(*comm_, reducer_->buckets());
  check_every_ = internal::ReplicaCheckInterval();
  if (check_every_ > 0) {
    params_ = std::move(params);
    param_names_ = std::move(names);
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::BroadcastStateFromRank0() {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> params;
  for (const auto& p : module_->parameters(/*recurse=*/true)) params.push_back(p);
  internal::BroadcastTensors(*comm_, params, 0, options_.timeout, "parameters");
  BroadcastBuffers();
}

void DistributedDataParallel::BroadcastBuffers() {
  std::vector<at::Tensor> buffers;
  for (const auto& b : module_->buffers(/*recurse=*/true)) {
    if (b.defined()) buffers.push_back(b);
  }
  if (buffers.empty()) return;
  torch::NoGradGuard no_grad;
  internal::BroadcastTensors(*comm_, buffers, 0, options_.timeout, "buffers");
}

DistributedDataParallel::JoinCounts DistributedDataParallel::JoinHandshake(
    const JoinCounts& mine) {
  const std::vector<int64_t> sums = internal::AllreduceInt64(
      *comm_, {mine.active, mine.window_end, mine.grad_sync}, ReduceOp::kSum,
      options_.timeout, "join handshake (ranks still training)");
  return {static_cast<int>(sums[0]), static_cast<int>(sums[1]),
          static_cast<int>(sums[2])};
}

void DistributedDataParallel::CheckIsWrapped(const torch::nn::Module* module) const {
  if (module == module_.get()) return;
  throw Error(
      absl::StatusCode::kInvalidArgument,
      absl::StrCat(
          "syncline::ddp: Forward() was given a module (",
          module ? module->name() : "null", " at ",
          absl::StrFormat("%p", static_cast<const void*>(module)),
          ") that is not the one this DistributedDataParallel wraps (", module_->name(),
          " at ", absl::StrFormat("%p", static_cast<const void*>(module_.get())),
          "): its gradients would never be averaged across ranks. Pass the module you "
          "constructed the wrapper with, or wrap this one"));
}

void DistributedDataParallel::PrepareForward() {
  // A forward with grad mode off (evaluation, often on rank 0 only) has no
  // backward to reduce: it communicates nothing and leaves the reducer, the
  // buffers and the iteration count as they are.
  if (!torch::GradMode::is_enabled()) return;
  if (in_join_) {
    JoinHandshake({/*active=*/1, /*window_end=*/no_sync_ ? 0 : 1,
                   /*grad_sync=*/no_sync_ ? 0 : 1});
  }
  if (!no_sync_ && !in_join_) {
    // Only synced iterations count: every rank runs them in the same order,
    // whatever else it runs locally.
    ++synced_iterations_;
    if (check_every_ > 0 && synced_iterations_ % check_every_ == 0) {
      internal::CheckReplicaDrift(*comm_, params_, param_names_, synced_iterations_,
                                  options_.timeout);
    }
  }
  reducer_->PrepareForward(/*sync=*/!no_sync_);
  if (options_.broadcast_buffers && !no_sync_) BroadcastBuffers();
}

bool DistributedDataParallel::ShadowIteration(const JoinOptions& options) {
  const JoinCounts all = JoinHandshake({});
  if (all.active == 0) return false;
  // Mirror exactly what the active ranks do in this iteration.
  if (all.window_end > 0) {
    reducer_->PrepareShadow();
    if (options_.broadcast_buffers) BroadcastBuffers();
  }
  if (all.grad_sync > 0) {
    reducer_->ShadowBackward();
    if (options.on_shadow_iteration) options.on_shadow_iteration();
  }
  return true;
}

void DistributedDataParallel::RegisterCommHook(CommHook hook) {
  if (!hook)
    throw Error(absl::StatusCode::kInvalidArgument, "syncline::ddp: empty comm hook");
  reducer_->SetCommHook(std::move(hook));
}

std::vector<BucketInfo> DistributedDataParallel::buckets() const {
  return reducer_->buckets();
}

std::vector<ReducerEvent> DistributedDataParallel::events() const {
  return reducer_->events();
}

bool DistributedDataParallel::buckets_rebuilt() const { return reducer_->rebuilt(); }

// --- NoSyncGuard ---

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel* ddp)
    : ddp_(ddp), previous_(ddp->no_sync_) {
  ddp_->no_sync_ = true;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : ddp_(other.ddp_), previous_(other.previous_) {
  other.ddp_ = nullptr;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (ddp_ != nullptr) ddp_->no_sync_ = previous_;
}

DistributedDataParallel::NoSyncGuard DistributedDataParallel::NoSync() {
  return NoSyncGuard(this);
}

// --- JoinGuard ---

DistributedDataParallel::JoinGuard::JoinGuard(DistributedDataParallel* ddp,
                                              JoinOptions options)
    : ddp_(ddp),
      options_(std::move(options)),
      uncaught_at_start_(std::uncaught_exceptions()) {
  if (ddp_->in_join_) {
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp: Join() guards cannot nest");
  }
  ddp_->in_join_ = true;
}

DistributedDataParallel::JoinGuard::JoinGuard(JoinGuard&& other) noexcept
    : ddp_(other.ddp_),
      options_(std::move(other.options_)),
      finished_(other.finished_),
      uncaught_at_start_(other.uncaught_at_start_) {
  other.ddp_ = nullptr;
}

int64_t DistributedDataParallel::JoinGuard::Finish() {
  if (ddp_ == nullptr || finished_) return 0;
  finished_ = true;
  int64_t shadowed = 0;
  try {
    while (ddp_->ShadowIteration(options_)) ++shadowed;
  } catch (...) {
    ddp_->in_join_ = false;
    throw;
  }
  ddp_->in_join_ = false;
  if (shadowed > 0) {
    SL_LOG(INFO,
           "syncline::ddp: rank %d ran out of data and shadowed %d "
           "iterations of the other ranks",
           ddp_->comm_->rank(), shadowed);
  }
  return shadowed;
}

DistributedDataParallel::JoinGuard::~JoinGuard() {
  if (ddp_ == nullptr || finished_) return;
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    ddp_->in_join_ = false;  // the loop failed: shadowing could only hang
    return;
  }
  try {
    Finish();
  } catch (const std::exception& e) {
    SL_LOG(ERROR, "syncline::ddp: Join() failed while shadowing: %s", e.what());
  }
}

DistributedDataParallel::JoinGuard DistributedDataParallel::Join(JoinOptions options) {
  return JoinGuard(this, std::move(options));
}

}  // namespace syncline::ddp
