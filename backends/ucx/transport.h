// transport.h: the UCP resources and the progress engine that one split
// family of UCX communicators shares.
//
// A Transport owns one UCP context, one worker, one endpoint per rank of
// the communicator that comm_create made with it (the "transport ranks"),
// those peers' identities and pidfds, and everything that drives the
// worker: the driver lock, the waiters' condition variable and the
// background progress thread. That communicator and every communicator
// split from it, recursively, hold the Transport by shared_ptr; the last
// one destroyed destroys it, so parent and child may go in either order.
// Each communicator keeps its own ops, failure state and tag space
// (tag.h); the Transport keeps the list of communicators attached to it.
//
// Progress is per worker: whichever thread drives (the holder of
// driver_mu_: a waiter, the poster's one pass, Test(), or the progress
// thread) runs ucp_worker_progress once and then advances the running ops
// of every attached communicator (Communicator::Advance). So a thread that
// waits on a parent op also completes child ops and vice versa: rank A
// waiting on a child op and rank B waiting on a parent op both move both.
// The hot path is unchanged from one communicator per worker: the waiter
// drives itself, with no hand-off and no extra lock (the attached list is
// only changed under driver_mu_).
//
// Peers are connected lazily (bootstrap.h): Create() only publishes this
// rank's address. Before an op is queued, the posting thread calls
// Prepare() with the transport ranks its schedule talks to; the addresses
// not yet known are read from the store then (once per peer, outside the
// driver lock), and the driver creates their endpoints (ConnectPending)
// after taking the op and before posting its first round. So a rank holds
// endpoints only to the peers it has talked to: O(log N) for the tree and
// doubling algorithms, 2 for rings, all of them after an alltoall. The
// store the addresses come from is the creating communicator's, valid only
// while it lives: when it goes first, ReleaseStore() reads every address
// still unknown, so that its split children can go on connecting.
//
// Peers: a dead peer (pidfd readable, or UCX's endpoint error callback) is
// marked here, per transport rank, and handed to every attached
// communicator that has that rank as a member, whose ops still waiting on
// it fail (communicator.h). Endpoints are never closed while any
// communicator of the family lives.
//
// Thread safety: Create() and the destructor on one thread. Attach and
// Detach take driver_mu_. WaitFor, TryProgress, NotifyWaiters and OnPosted
// from any thread. Members marked "driver" are touched only with
// driver_mu_ held.
#ifndef SYNCLINE_BACKENDS_UCX_TRANSPORT_H_
#define SYNCLINE_BACKENDS_UCX_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/ucx/bootstrap.h"
#include "backends/ucx/operation.h"
#include "backends/ucx/options.h"
#include "backends/ucx/ucx_handles.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

class Communicator;

// A receive that UCP may still hold after its owner is gone (notice.cc).
struct NoticeSlot {
  void* request = nullptr;  // the UCP request while posted
  char in[512] = {};
  int from = -1;  // the sender of a notice that arrived
  std::string text;
};

class Transport {
 public:
  // Create()
  //
  // Collective over config.size ranks: creates the context and worker and
  // publishes its address through config.store (PublishPeerInfo); connects
  // to no one yet. The caller proves the paths to its ring neighbours
  // (Communicator's hello) and then calls StartProgressThread(). On failure
  // returns the code with `*error` set.
  static sl_result_t Create(const sl_comm_config_t& config, const Options& options,
                            std::chrono::steady_clock::time_point deadline,
                            std::shared_ptr<Transport>* transport, std::string* error);

  // Joins the progress thread, flushes, force-closes the endpoints and
  // frees the UCP objects. Runs when the family's last communicator goes.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  void StartProgressThread();

  // Prepare()
  //
  // Any thread but the driver (the posting thread): makes sure the driver
  // will connect to each of `tranks` before it posts the op that needs
  // them. Reads the addresses not yet known from the store (one Get each,
  // until `deadline`). Fails with the store's code when a read fails or
  // the store is gone (ReleaseStore() could not read that peer).
  sl_result_t Prepare(const std::vector<int>& tranks, Clock::time_point deadline,
                      std::string* error);
  // The driver: creates the endpoints Prepare() queued and hands them to
  // the attached communicators. A peer that cannot be reached is marked
  // dead with the reason (ReachabilityHint), which fails the ops that need it.
  void ConnectPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // The creating communicator goes while others of the family stay: read
  // every address still unknown (bounded by `deadline`), then forget the
  // store.
  void ReleaseStore(Clock::time_point deadline);
  // How many ranks of the transport share this machine.
  int ranks_on_host() const { return ranks_on_host_; }

  // Attach() adds `comm` to the communicators the driver advances and tells
  // it which members are already dead. Detach() removes it (driver_mu_ must
  // be held: the communicator's destructor does its cleanup in the same
  // critical section).
  void Attach(Communicator* comm);
  void Detach(Communicator* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);

  // Progress entry points for Request (work.h) and Communicator: drive or
  // wait until `request` is done or `until` (false on timeout); one pass if
  // nobody else drives; wake sleeping waiters.
  bool WaitFor(const Request& request, Clock::time_point until);
  void TryProgress();
  void NotifyWaiters();
  // A communicator counts an op before queueing it (CountPosted), and
  // after queueing it calls OnPosted, which wakes a sleeping driver and the
  // idle progress thread and then makes one pass so its first messages
  // leave at once.
  void CountPosted() { unfinished_.fetch_add(1); }
  void OnPosted();
  // After a communicator was aborted: wakes every driver and waiter.
  void Wake();
  // Ops that still hold UCP requests after their communicator let go of
  // them; freed once UCP has finished with them, or with the transport.
  void AdoptZombie(std::unique_ptr<Operation> op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void AdoptNotice(std::unique_ptr<NoticeSlot> slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // Delivers what was sent but may still sit in a transport queue (tcp),
  // bounded by `deadline`.
  void Flush(Clock::time_point deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // Looks at same-host peers' pidfds (at most every 10 ms unless `force`).
  // `now`: the caller's clock reading, if it has one (a driver pass does).
  void CheckPeers(bool force, Clock::time_point now = Clock::now())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void CountFinished() { unfinished_.fetch_sub(1, std::memory_order_relaxed); }

  // Split serializes on this (communicator.cc): the tag-space counter must
  // not be read by two splits of one family at once on one rank.
  std::mutex& split_mu() { return split_mu_; }
  int64_t next_space() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(split_mu_) {
    return next_space_;
  }
  void set_next_space(int64_t next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(split_mu_) {
    next_space_ = next;
  }

  std::mutex& driver_mu() ABSL_LOCK_RETURNED(driver_mu_) { return driver_mu_; }
  ucp_worker_h worker() const { return worker_.get(); }
  int worker_event_fd() const { return worker_.event_fd(); }
  // Driver only: null (and an empty PeerInfo) until connected.
  ucp_ep_h endpoint(int trank) const { return endpoints_.at(trank); }
  const PeerInfo& peer(int trank) const { return peers_[trank]; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const Options& options() const { return options_; }

 private:
  Transport(int rank, int size, const Options& options, const sl_store_t* store);
  // Everything below runs with driver_mu_ held.
  // One pass; `now`, when given, receives the time the pass read (one
  // clock read per pass serves the pass and its caller's loop).
  bool DriveOnce(Clock::time_point* now = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  // Sleeps on the worker's event fd until an event, a signal or `until`;
  // false if the sleep simply ran out (no fd woke it).
  bool BlockOnWorker(Clock::time_point until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  template <typename Done>
  void DriveUntil(Done done, Clock::time_point until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void MarkDead(int trank, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(driver_mu_);
  void ProgressLoop();  // the background thread
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  const int rank_;
  const int size_;
  const Options options_;

  // Driver-owned. Declared before the UCP objects so that the zombies go
  // after the worker: UCP may hold their callbacks until then.
  std::vector<std::unique_ptr<Operation>> zombies_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<std::unique_ptr<NoticeSlot>> notice_zombies_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<Communicator*> comms_ ABSL_GUARDED_BY(driver_mu_);
  std::vector<std::string> dead_ ABSL_GUARDED_BY(driver_mu_);  // "" while alive
  Clock::time_point last_peer_check_ ABSL_GUARDED_BY(driver_mu_);

  struct ErrorArg {
    Transport* transport;
    int rank;
  };
  std::vector<ErrorArg> error_args_;  // stable addresses for UCP callbacks

  UcpContext context_;
  UcpWorker worker_;
  Endpoints endpoints_;
  std::vector<PeerInfo> peers_;  // driver; known once connected
  std::vector<int> pidfds_;  // same-host peers (-1 otherwise); owned
  int ranks_on_host_ = 1;

  // Lazy connection: the posting side reads addresses under connect_mu_;
  // the driver takes them from pending_.
  std::mutex connect_mu_;
  const sl_store_t* store_ ABSL_GUARDED_BY(connect_mu_);
  std::vector<char> requested_ ABSL_GUARDED_BY(connect_mu_);  // read or queued
  std::mutex pending_mu_;
  std::vector<std::pair<int, PeerInfo>> pending_ ABSL_GUARDED_BY(pending_mu_);
  std::atomic<bool> has_pending_{false};

  std::mutex split_mu_;
  int64_t next_space_ ABSL_GUARDED_BY(split_mu_) = 1;  // 0 is the creating comm's

  std::mutex driver_mu_;
  std::mutex mu_ ABSL_ACQUIRED_AFTER(driver_mu_);
  std::condition_variable cv_;         // waiters: a request finished or the driver left
  std::condition_variable thread_cv_;  // the progress thread
  std::atomic<bool> thread_idle_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> has_incoming_{false};
  std::atomic<int> waiters_{0};
  std::atomic<bool> driver_blocked_{false};
  std::atomic<int> unfinished_{0};  // posted ops of every attached comm, not yet done
  std::atomic<int64_t> last_drive_ns_{0};
  std::thread progress_thread_;  // started last, joined first
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_TRANSPORT_H_
