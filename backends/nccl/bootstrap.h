// bootstrap.h: creating an NCCL communicator through the core's store, with
// a deadline, and owning it.
//
// Protocol (keys are already scoped to the communicator by the core):
//   rank 0   ncclGetUniqueId -> set "nccl/uid" (128 bytes), or set
//            "nccl/uid" = "error:<why>" so that the others fail at once;
//   all      get "nccl/uid" (until the deadline), add "nccl/joined/<rank>",
//            ncclCommInitRankConfig with blocking = 0, then poll
//            ncclCommGetAsyncError until the comm is ready or the deadline;
//            on success add "nccl/ready/<rank>".
// A rank that never arrives therefore gives an error, not a hang: the
// others abort their half-built comm at the deadline and name the ranks
// that never joined ("missing") and those that joined but did not finish
// ("slow"), read from the joined/ready keys with non-blocking adds.
//
// Thread safety: CreateNcclComm is called by comm_create's thread only.
// NcclComm is owned by one Communicator; see its comment.
#ifndef SYNCLINE_BACKENDS_NCCL_BOOTSTRAP_H_
#define SYNCLINE_BACKENDS_NCCL_BOOTSTRAP_H_

#include <nccl.h>

#include <chrono>
#include <string>

#include "syncline/plugin_abi.h"

namespace syncline::nccl_backend {

// "ncclRemoteError: remote process exited or there was a network error
// (last NCCL error: ...)", for messages. `comm` may be null.
std::string NcclErrorText(ncclResult_t result, ncclComm_t comm);

// ToSlResult()
//
// The ABI code for an NCCL failure: network and remote failures are
// SL_ERR_PEER, misuse is SL_ERR_INVALID_ARGUMENT, the rest SL_ERR_INTERNAL.
sl_result_t ToSlResult(ncclResult_t result);

// NcclComm
//
// Owns one ncclComm_t. Destruction aborts the comm (ncclCommAbort never
// waits for peers), so dropping a comm on an error path cannot hang;
// Finalize() is the graceful path, bounded by a deadline.
//
// Thread safety: not synchronized. The Communicator's issue lock serializes
// every call except GetAsyncError(), which NCCL allows from any thread.
class NcclComm {
 public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
  ~NcclComm() { Abort(); }
  NcclComm(NcclComm&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  explicit operator bool() const { return comm_ != nullptr; }

  // ncclCommAbort: in-flight kernels stop, peers see a failure. Idempotent.
  void Abort();
  // ncclCommFinalize (flushes issued ops) then ncclCommDestroy, polling
  // until `deadline`; aborts instead if that fails or runs out. Returns
  // false if it had to abort.
  bool Finalize(std::chrono::steady_clock::time_point deadline);

 private:
  ncclComm_t comm_ = nullptr;
};

// PublishBootstrapFailure()
//
// Rank 0 only (others are not waited on before NCCL init): tells the other
// ranks, through the uid key, that it failed before publishing the id, so
// that they fail at once with its reason instead of at the deadline.
void PublishBootstrapFailure(const sl_comm_config_t& config, const std::string& why);

// CreateNcclComm()
//
// Runs the protocol above for `config` on CUDA device `device` (already
// current on this thread). On failure returns the code and fills `message`.
sl_result_t CreateNcclComm(const sl_comm_config_t& config, int device,
                           std::chrono::steady_clock::time_point deadline, NcclComm* out,
                           std::string* message);

}  // namespace syncline::nccl_backend

#endif  // SYNCLINE_BACKENDS_NCCL_BOOTSTRAP_H_
