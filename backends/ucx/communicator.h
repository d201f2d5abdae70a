// communicator.h: one UCX communicator behind an sl_comm_t.
//
// Resources: each communicator owns its own UCP context, worker and one
// endpoint per peer (ucx_handles.h). The alternative, one worker per
// process with a tag space per communicator, would let Split reuse
// endpoints, but it makes every communicator's progress, abort and failure
// contend on one worker lock and lets one group's dead peer or abort
// disturb another's endpoints. Isolation won: a communicator's failure
// policy (below) can close its endpoints without touching anyone else's,
// and each group's progress needs no cross-group locking. The cost is a
// fresh worker and wire-up per sub-group (a few ms at creation). The tag
// still carries the communicator id (tag.h).
//
// Progress (who calls into UCP): exactly one thread at a time, the holder
// of `driver_mu_`, drives: it runs ucp_worker_progress and advances the
// running Operations. It can be
//   - a thread in Wait() (request_wait): it drives until its request is
//     done, busy-polling for Options::busy_poll_us after the last event
//     (yielding its core after 20 us, so a peer rank that shares the core
//     can answer) and then arming the worker and sleeping in poll() on the
//     worker's event fd (plus the pidfds of same-host peers);
//   - the posting thread, which makes one non-blocking pass so that the
//     op's first messages leave at once;
//   - Test(), which makes one pass if nobody else is driving;
//   - the background progress thread, which drives ops nobody has waited
//     for within Options::async_progress_delay_us and hands over as soon
//     as a waiter appears.
// Trade-off: the waiter that drives pays no thread hand-off (a futex wake
// costs ~50 us on 2 cores, 10x the latency target), and busy-polling
// before sleeping keeps the 8-byte path in the microseconds while an idle
// communicator burns no CPU. Async progress without waiting exists so that
// overlapped ops (DDP buckets) and ops a rank forgets to wait for still
// advance, at the price of the delay before the thread steps in.
//
// Failure policy: the first collective that fails (timeout, dead peer,
// size mismatch) breaks the communicator for collectives: a half-finished
// collective leaves peers in unknown states. Later collectives fail at
// once, naming the op that broke it, and the peers are sent a failure
// notice (notice.cc) so that they fail now rather than at their deadlines.
// A dead peer (pidfd or UCX endpoint error, see bootstrap.h) fails an op
// only while the op still waits on a transfer with it, so a rank that
// finished and exited is harmless. Point-to-point ops fail only when their
// own peer does. Abort() fails everything with SL_ERR_ABORTED at once,
// wakes every waiter, and notifies the peers.
//
// Thread safety: Post() from one thread at a time (the core serializes
// it); Abort(), Test/Wait (via Request) from any thread.
#ifndef SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/ucx/bootstrap.h"
#include "backends/ucx/operation.h"
#include "backends/ucx/options.h"
#include "backends/ucx/ucx_handles.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

class Communicator {
 public:
  // Create()
  //
  // Collective over config.size ranks: exchanges worker addresses through
  // config.store, connects to every peer and proves each path with a hello
  // message. Blocks until then or config.timeout_ms; on failure `err` names
  // the missing or unreachable ranks and what to change.
  static sl_result_t Create(const sl_comm_config_t& config,
                            std::unique_ptr<Communicator>* comm, sl_error_t* err);

  // Fails unfinished ops with SL_ERR_ABORTED, joins the progress thread,
  // force-closes the endpoints and frees the UCP objects.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Post()
  //
  // Validates `op`, builds its schedule and queues it; never blocks on
  // peers. Invalid ops, and collectives after a failure or an abort, fail
  // at once with the reason in `err`.
  sl_result_t Post(const sl_op_t& op, std::shared_ptr<Request>* request, sl_error_t* err);

  // Abort(): see the file comment. Idempotent.
  void Abort();

  // For Request: drive or wait until `request` is done or `until`; false
  // on timeout. TryProgress() makes one pass if nobody else drives.
  bool WaitFor(const Request& request, Clock::time_point until);
  void TryProgress();
  // Wakes threads blocked in WaitFor (called when a request completes).
  void NotifyWaiters();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  Communicator(const sl_comm_config_t& config, const Options& options);
  sl_result_t Bootstrap(const sl_comm_config_t& config, std::string* error);
  sl_result_t Hello(std::chrono::steady_clock::time_point deadline, std::string* error);
  std::string Where() const;

  // progress.cc: everything below runs with driver_mu_ held.
  bool DriveOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void BlockOnWorker(Clock::time_point until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void AdvanceCollectives(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void AdvancePointToPoint(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void CheckPeers(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void FailCollectives(sl_result_t code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void FailOp(std::unique_ptr<Operation> op, sl_result_t code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void FinishOp(std::unique_ptr<Operation> op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void MarkDead(int rank, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // Failure notices (progress.cc): when a collective fails here, every
  // peer is told at once, so ranks that only wait on the failed one
  // transitively fail now rather than at their deadline.
  void PostNoticeRecv() ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // After Abort(): tells the peers once (an abort fails them too).
  void NoticeAbort() ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void SendNotice(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  static void OnNotice(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                       void* user);
  void Flush(Clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void ProgressLoop();  // the background thread
  // Drives until `done()` or `until`; returns with driver_mu_ still held.
  template <typename Done>
  void DriveUntil(Done done, Clock::time_point until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  const int rank_;
  const int size_;
  const uint64_t comm_id_;
  const uint64_t comm_bits_;
  const Options options_;

  // Operations are declared before the UCP objects so that they are
  // destroyed after the worker: UCP may still hold their callbacks until
  // then. Driver-owned.
  std::deque<std::unique_ptr<Operation>> collectives_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<std::unique_ptr<Operation>> p2p_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<std::unique_ptr<Operation>> zombies_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<std::string> dead_ ABSL_GUARDED_BY(driver_mu_);  // "" while alive
  Clock::time_point last_peer_check_ ABSL_GUARDED_BY(driver_mu_);
  bool any_dead_ ABSL_GUARDED_BY(driver_mu_) = false;
  // The posted notice receive, its buffer, and a notice that arrived.
  void* notice_request_ ABSL_GUARDED_BY(driver_mu_) = nullptr;
  char notice_in_[512] ABSL_GUARDED_BY(driver_mu_) = {};
  int notice_from_ ABSL_GUARDED_BY(driver_mu_) = -1;
  std::string notice_text_ ABSL_GUARDED_BY(driver_mu_);
  std::string notice_out_ ABSL_GUARDED_BY(driver_mu_);  // stays alive while sent
  // The driver's copy of "a collective failed"; Post() reads broken_code_.
  bool driver_broken_ ABSL_GUARDED_BY(driver_mu_) = false;

  struct ErrorArg {
    Communicator* comm;
    int rank;
  };
  std::vector<ErrorArg> error_args_;  // stable addresses for UCP callbacks

  UcpContext context_;
  UcpWorker worker_;
  Endpoints endpoints_;
  std::vector<ucp_ep_h> eps_;        // by rank; owned by endpoints_
  std::vector<PeerInfo> peers_;
  std::vector<int> pidfds_;          // same-host peers (-1 otherwise); owned
  Wire wire_;

  std::mutex driver_mu_;
  std::mutex mu_ ABSL_ACQUIRED_AFTER(driver_mu_);
  std::condition_variable cv_;         // waiters: a request finished or the driver left
  std::condition_variable thread_cv_;  // the progress thread
  std::vector<std::unique_ptr<Operation>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Request>> pending_ ABSL_GUARDED_BY(mu_);
  bool thread_idle_ ABSL_GUARDED_BY(mu_) = false;
  sl_result_t broken_code_ ABSL_GUARDED_BY(mu_) = SL_OK;
  std::string broken_message_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> has_incoming_{false};
  std::atomic<int> waiters_{0};
  std::atomic<bool> driver_blocked_{false};
  std::atomic<int> unfinished_{0};  // posted ops not yet completed
  std::atomic<int64_t> last_drive_ns_{0};

  uint64_t collective_seq_ = 0;  // Post() only (serialized by the core)
  std::thread progress_thread_;  // started last in Create, joined first
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_
