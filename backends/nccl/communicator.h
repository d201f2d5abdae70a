// communicator.h: one NCCL communicator behind an sl_comm_t.
//
// Create() checks for a CUDA device first (without one it fails at once with
// SL_ERR_UNAVAILABLE and a hint to use a CPU backend), then bootstraps an
// NCCL comm through the core's store with a deadline (bootstrap.h), and
// creates the CUDA objects this communicator owns: its stream, a pool of
// completion events, and a one-float scratch buffer for barriers.
//
// Stream semantics of Post(): the op first makes the communicator's stream
// wait on an event recorded on the caller's stream (the data buffer's
// `stream`, NULL meaning the legacy default stream), so it sees everything
// the caller queued before; it then runs on the communicator's own stream
// and records a completion event that the request polls. The host is never
// blocked by Post() except while a non-blocking NCCL call reports
// ncclInProgress (first contact with a peer), bounded by the op's deadline.
//
// Threads. The caller's poster (the core serializes posts) issues NCCL
// calls under `issue_mu_`. One watchdog thread, owned and joined by this
// object, sweeps every `watchdog_ms` (default 10): it retires completed
// requests, checks per-op deadlines, and polls ncclCommGetAsyncError. On a
// timeout or an NCCL error it breaks the communicator (Break): every pending
// request fails with its op, sequence number and the NCCL reason, and the
// NCCL comm is aborted so that in-flight kernels stop and peers see the
// failure. Abort() does the same on request, from any thread.
//
// Other ranks. A rank's ncclCommAbort tears down its NCCL connections, so a
// peer blocked on it inside NCCL gets an asynchronous error; a peer that is
// not talking to it would only fail at its own op deadline, and neither
// would know which rank failed first. So the other ranks also learn of it
// through the store (abort_record.h). The store
// given to comm_create stays valid until comm_destroy, so a rank whose
// communicator breaks on a local fault (an op past its deadline, an NCCL
// error, a failed launch) publishes an abort record, after aborting its own
// NCCL comm and before failing its requests. Every rank's AbortChannel
// thread polls for the record every `abort_poll_ms` (default 250; 0: off)
// and, when one appears, breaks its communicator with SL_ERR_PEER and a
// message naming the rank that aborted first, its op and seq, and why. A
// rank that breaks on its own fault after another rank published (its NCCL
// saw the peer's abort) names that first rank in its messages too. Neither
// Abort() nor destruction publishes: they are this rank's decisions, and a
// clean shutdown leaves no record. The destructor stops the AbortChannel
// thread and the watchdog before anything else, so nothing touches the
// store after comm_destroy returns.
//
// Split() (comm_split) runs ncclCommSplit on this communicator's NCCL comm
// (NCCL 2.18 and newer; plugin.cc leaves comm_split NULL before that): the
// child shares no state with the parent but the device and options, and
// watches its own store (the one comm_split passes) for aborts.
//
// Thread safety: Post() from one thread at a time; Abort() from any thread;
// destruction once, after every request handle has been freed.
#ifndef SYNCLINE_BACKENDS_NCCL_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "backends/nccl/abort_record.h"
#include "backends/nccl/bootstrap.h"
#include "backends/nccl/cuda_handles.h"
#include "backends/nccl/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::nccl_backend {

// Backend options ("key=value;..." in sl_comm_config_t::options).
struct CommOptions {
  // How often the watchdog sweeps; a timeout or NCCL error is noticed
  // within this much of happening.
  std::chrono::milliseconds watchdog_period{10};
  // How often the store is polled for another rank's abort record
  // ("abort_poll_ms"); zero turns the propagation off (publishing too).
  std::chrono::milliseconds abort_poll_period{250};
};

class Communicator {
 public:
  // Create()
  //
  // Collective over config.size ranks; blocks until all have joined or
  // config.timeout_ms. On failure fills `err` and returns its code.
  static sl_result_t Create(const sl_comm_config_t& config,
                            std::unique_ptr<Communicator>* comm, sl_error_t* err);

  // Joins the watchdog, lets ops still in flight finish (bounded by their
  // deadlines), then finalizes the NCCL comm, or aborts it if it broke.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Post()
  //
  // Validates and issues `op` (see the file comment). Invalid ops, ops on a
  // broken or aborted communicator, and NCCL launch failures fail at once.
  sl_result_t Post(const sl_op_t& op, std::shared_ptr<Request>* request, sl_error_t* err);

  // Abort(): fails every pending request with SL_ERR_ABORTED and aborts the
  // NCCL comm. Publishes nothing (see the file comment). Idempotent; safe
  // from any thread.
  void Abort();

  // Split() (split.cc)
  //
  // comm_split: collective over this communicator; ranks with the same
  // `color` (>= 0) form a child, ordered by `key` then by rank here; a
  // negative color takes part and gets no child (*child null). `store` is
  // the child's (valid until its destruction). Bounded by this
  // communicator's default deadline; a split that fails or runs out breaks
  // this communicator (NCCL leaves it unusable). Not concurrent with Post().
  sl_result_t Split(int color, int key, const sl_store_t* store, uint64_t new_comm_id,
                    std::unique_ptr<Communicator>* child, sl_error_t* err);

 private:
  // The CUDA objects one communicator owns (made on its device).
  struct CudaResources {
    Stream stream;
    DeviceBuffer scratch;
    std::shared_ptr<EventPool> events;
    Event ready_event;
    // Makes them on `device`, which must be current.
    static cudaError_t Make(int device, CudaResources* out);
  };

  Communicator(const sl_comm_config_t& config, int device, CommOptions options,
               CudaResources cuda, NcclComm comm);

  // Issues the request's op and records its done event. On failure returns
  // the code and a message; `broke` says whether the NCCL comm is now
  // unusable (so the caller must Break it).
  sl_result_t IssueLocked(Request& request, std::string* message, bool* broke)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);
  // Polls a non-blocking NCCL call that returned ncclInProgress.
  ncclResult_t AwaitEnqueueLocked(Clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);

  // watchdog.cc
  void WatchdogLoop();
  void Sweep();
  // Why the communicator breaks. Every pending request fails with `code`
  // and "did not complete: <cause>", except `culprit` (the op that timed
  // out, if any), which gets its own code and message.
  struct BreakReason {
    static BreakReason Of(sl_result_t code, std::string cause) {
      BreakReason reason;
      reason.code = code;
      reason.cause = std::move(cause);
      return reason;
    }
    sl_result_t code = SL_ERR_ABORTED;
    std::string cause;
    const Request* culprit = nullptr;
    sl_result_t culprit_code = SL_OK;
    std::string culprit_message;
    // A local fault: tell the other ranks through the store, blaming `op`
    // (the op that failed or was in flight first; null when none).
    bool publish = false;
    const sl_op_t* op = nullptr;
  };
  // Breaks the communicator once (later calls do nothing): condemns every
  // pending request so that no completion seen from now on counts as
  // success, aborts the NCCL comm (its kernels stop), publishes the abort
  // if `reason.publish`, and only then fails the requests, so that a caller
  // never reuses a buffer an aborted kernel might still write.
  void Break(BreakReason reason);
  // Publishes `reason` (abort_record.h); returns what to add to the
  // requests' messages: who aborted first if it was another rank, or why
  // the other ranks could not be told.
  std::string PublishAbort(const BreakReason& reason);
  // The AbortChannel's callback: another rank aborted first.
  void OnRemoteAbort(const AbortRecord& first);

  // "rank 1/4 (cuda:1)", for messages.
  const std::string& where() const { return where_; }

  const int rank_;
  const int size_;
  const int device_;
  const std::string where_;
  const std::chrono::milliseconds default_timeout_;
  const CommOptions options_;

  // CUDA objects, declared before comm_ so that they outlive it.
  Stream stream_;
  DeviceBuffer scratch_;
  std::shared_ptr<EventPool> events_;

  // Serializes every NCCL call that is not thread-safe: issuing ops,
  // aborting, finalizing. The watchdog only try-locks it.
  std::mutex issue_mu_;
  Event ready_event_ ABSL_GUARDED_BY(issue_mu_);
  NcclComm comm_ ABSL_GUARDED_BY(issue_mu_);
  // Set by Break() before it takes issue_mu_, so that a Post polling an
  // in-progress NCCL call gives up and lets the abort through.
  std::atomic<bool> breaking_{false};

  std::mutex mu_;
  std::condition_variable cv_;  // wakes the watchdog to stop
  // Issued and not yet seen complete, in issue (= completion) order.
  std::deque<std::shared_ptr<Request>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  sl_result_t broken_code_ ABSL_GUARDED_BY(mu_) = SL_OK;  // SL_OK while usable
  std::string broken_message_ ABSL_GUARDED_BY(mu_);

  // Null for one rank or abort_poll_ms=0. Its thread is started by the
  // constructor after the watchdog and stopped first by the destructor.
  std::unique_ptr<AbortChannel> abort_channel_;

  // Started last by the constructor, joined first by the destructor.
  std::thread watchdog_;
};

}  // namespace syncline::nccl_backend

#endif  // SYNCLINE_BACKENDS_NCCL_COMMUNICATOR_H_
