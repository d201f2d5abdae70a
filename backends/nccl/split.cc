// split.cc: Communicator::Split, comm_split over ncclCommSplit.
//
// ncclCommSplit arrived in NCCL 2.18; before that this file compiles to a
// stub and plugin.cc leaves comm_split NULL, so the core builds sub-groups
// with comm_create (a fresh communicator bootstrapped through the store).
#include <cinttypes>
#include <cstdio>
#include <thread>
#include <utility>

#include "backends/nccl/communicator.h"
#include "syncline/plugin_sdk/error.h"

namespace syncline::nccl_backend {

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)

namespace {

constexpr std::chrono::milliseconds kSplitPoll(1);

// The state of a split in progress: an error on either comm wins, then
// "in progress" on either; success only when both are done.
ncclResult_t SplitState(ncclComm_t parent, ncclComm_t child) {
  ncclResult_t parent_state = ncclSuccess;
  ncclResult_t child_state = ncclSuccess;
  if (ncclCommGetAsyncError(parent, &parent_state) != ncclSuccess)
    parent_state = ncclInternalError;
  if (child != nullptr && ncclCommGetAsyncError(child, &child_state) != ncclSuccess)
    child_state = ncclInternalError;
  for (ncclResult_t state : {parent_state, child_state}) {
    if (state != ncclSuccess && state != ncclInProgress) return state;
  }
  return parent_state == ncclInProgress ? parent_state : child_state;
}

}  // namespace

sl_result_t Communicator::Split(int color, int key, const sl_store_t* store,
                                uint64_t new_comm_id, std::unique_ptr<Communicator>* child,
                                sl_error_t* err) {
  child->reset();
  char head[96];
  std::snprintf(head, sizeof(head), "nccl comm_split (color %d, key %d) on ", color, key);
  if (store == nullptr) {
    return backend::SlSetError(err, SL_ERR_INVALID_ARGUMENT, "%s%s: no store for the child",
                               head, where_.c_str());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_code_ != SL_OK) {
      return backend::SlSetError(
          err, broken_code_, "%s%s: the communicator is unusable after an earlier "
          "failure: %s", head, where_.c_str(), broken_message_.c_str());
    }
  }
  ScopedDevice on(device_);
  CudaResources cuda_objects;
  cudaError_t cuda = on.status();
  if (color >= 0 && cuda == cudaSuccess) cuda = CudaResources::Make(device_, &cuda_objects);
  // Without its CUDA objects this rank still takes part (with no color), so
  // that the others are not left waiting in ncclCommSplit.
  const int nccl_color = color >= 0 && cuda == cudaSuccess ? color : NCCL_SPLIT_NOCOLOR;

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that the split can be abandoned at the deadline
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  char name[64];
  std::snprintf(name, sizeof(name), "syncline-comm%" PRIu64, new_comm_id);
  config.commName = name;
#endif
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + default_timeout_;
  NcclComm split;
  ncclResult_t state = ncclSuccess;
  std::string nccl_error;
  {
    std::lock_guard<std::mutex> issue(issue_mu_);
    if (!comm_) {
      return backend::SlSetError(err, SL_ERR_ABORTED, "%s%s: the communicator was aborted",
                                 head, where_.c_str());
    }
    ncclComm_t raw = nullptr;
    state = ncclCommSplit(comm_.get(), nccl_color, key, &raw, &config);
    split = NcclComm(raw);  // aborted on every early return below
    while (state == ncclInProgress && !breaking_ && Clock::now() < deadline) {
      std::this_thread::sleep_for(kSplitPoll);
      state = SplitState(comm_.get(), split.get());
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      nccl_error = NcclErrorText(state, comm_.get());
    }
  }
  std::string message;
  sl_result_t rc = SL_OK;
  if (state == ncclInProgress) {
    rc = breaking_ ? SL_ERR_ABORTED : SL_ERR_TIMEOUT;
    char waited[32];
    std::snprintf(waited, sizeof(waited), "%.1f",
                  std::chrono::duration<double>(Clock::now() - start).count());
    message = std::string(head) + where_ +
              (breaking_ ? ": the communicator was aborted during the split"
                         : std::string(": ncclCommSplit did not finish within ") +
                               waited +
                               " s; a rank did not call Split, or called it with "
                               "another communicator");
  } else if (state != ncclSuccess) {
    rc = ToSlResult(state);
    message = std::string(head) + where_ + ": ncclCommSplit failed: " + nccl_error;
  }
  if (rc != SL_OK) {
    // NCCL leaves the parent mid-split: it cannot be used for anything else.
    BreakReason reason = BreakReason::Of(rc, message);
    reason.publish = true;
    Break(std::move(reason));
    return backend::SlSetError(err, rc, "%s", message.c_str());
  }
  if (cuda != cudaSuccess) {
    return backend::SlSetError(err, SL_ERR_UNAVAILABLE,
                               "%s%s: setting up the child's CUDA objects failed: %s", head,
                               where_.c_str(), CudaErrorText(cuda).c_str());
  }
  if (color < 0) return SL_OK;

  int child_rank = 0;
  int child_size = 0;
  if (ncclCommUserRank(split.get(), &child_rank) != ncclSuccess ||
      ncclCommCount(split.get(), &child_size) != ncclSuccess) {
    return backend::SlSetError(err, SL_ERR_INTERNAL,
                               "%s%s: NCCL could not say the child's rank and size: %s",
                               head, where_.c_str(),
                               NcclErrorText(ncclInternalError, split.get()).c_str());
  }
  sl_comm_config_t child_config{};
  child_config.struct_size = sizeof(sl_comm_config_t);
  child_config.rank = child_rank;
  child_config.size = child_size;
  child_config.store = store;
  child_config.device = SL_DEVICE_CUDA;
  child_config.device_index = device_;
  child_config.timeout_ms = default_timeout_.count();
  child_config.comm_id = new_comm_id;
  child->reset(new Communicator(child_config, device_, options_, std::move(cuda_objects),
                                std::move(split)));
  backend::SlClearError(err);
  return SL_OK;
}

#else  // NCCL older than 2.18: plugin.cc does not expose comm_split.

sl_result_t Communicator::Split(int, int, const sl_store_t*, uint64_t,
                                std::unique_ptr<Communicator>* child, sl_error_t* err) {
  child->reset();
  return backend::SlSetError(err, SL_ERR_UNSUPPORTED,
                             "nccl comm_split needs NCCL 2.18 or newer (ncclCommSplit)");
}

#endif

}  // namespace syncline::nccl_backend
