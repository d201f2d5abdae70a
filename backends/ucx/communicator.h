// communicator.h: one UCX communicator behind an sl_comm_t.
//
// Resources: a communicator made by comm_create gets its own Transport
// (transport.h): a UCP context, a worker, and an endpoint to each peer it
// talks to, made when it first does (peers' addresses are read from the
// store then, not at creation: see bootstrap.h). Split
// (comm_split) does not make new ones: the children share the parent's
// Transport, reuse its endpoints to their members, and get a tag space of
// their own on its worker (tag.h). So a split family -- the created
// communicator and everything split from it -- shares one worker, while
// independently created communicators stay isolated from each other.
// Trade-offs: Split costs one small allgather over the parent instead of a
// store exchange, a new worker and a wire-up (a few ms, and a store round
// trip per rank); in exchange, one family's communicators share one driver
// lock (progress of one advances all, see below) and their failure domains
// touch through the endpoints they share (see the failure policy). Groups
// that want full isolation from each other are created with comm_create.
//
// Progress (who calls into UCP): exactly one thread at a time per worker,
// the holder of the Transport's driver lock, drives: it runs
// ucp_worker_progress and advances the running Operations of every
// communicator of the family (Advance()). It can be
//   - a thread in Wait() (request_wait): it drives until its request is
//     done, busy-polling for Options::busy_poll_us after the last event
//     (yielding its core after 20 us, so a peer rank that shares the core
//     can answer) and then arming the worker and sleeping in poll() on the
//     worker's event fd (plus the pidfds of same-host peers);
//   - the posting thread, which makes one non-blocking pass so that the
//     op's first messages leave at once;
//   - Test(), which makes one pass if nobody else is driving;
//   - the background progress thread (one per Transport), which drives ops
//     nobody has waited for within Options::async_progress_delay_us and
//     hands over as soon as a waiter appears. While another thread holds
//     the driver lock (a waiter asleep in poll() makes no passes, so its
//     ops look idle) it checks again every async_progress_delay_us.
// Because whoever drives advances every communicator of the worker, a
// thread waiting on a parent op completes child ops too, and vice versa:
// one rank waiting on a child op while another waits on a parent op cannot
// deadlock. Trade-off: the waiter that drives pays no thread hand-off (a
// futex wake costs ~50 us on 2 cores, 10x the latency target), and
// busy-polling before sleeping keeps the 8-byte path in the microseconds
// while an idle worker burns no CPU. Async progress without waiting exists
// so that overlapped ops (DDP buckets) and ops a rank forgets to wait for
// still advance, at the price of the delay before the thread steps in.
//
// Failure policy: the first collective that fails (timeout, dead peer,
// size mismatch) breaks the communicator for collectives: a half-finished
// collective leaves peers in unknown states. Later collectives fail at
// once, naming the op that broke it, and the peers are sent a failure
// notice (notice.cc, in this communicator's tag space) so that they fail
// now rather than at their deadlines. Breaking is per communicator: the
// parent and the other children of a family keep working. A dead peer
// (pidfd or UCX endpoint error, see bootstrap.h) is a fact about the
// shared endpoint: it fails the ops, in any communicator of the family
// that has the peer as a member, that still wait on a transfer with it, so
// a rank that finished and exited is harmless. Point-to-point ops fail
// only when their own peer does. Abort() fails this communicator's ops
// with SL_ERR_ABORTED at once, wakes every waiter and notifies this
// communicator's peers; it does not close the shared endpoints, so the
// parent (or a child) of an aborted communicator is untouched and goes on
// working (to stop a whole family, abort each member). Destroying the
// parent first leaves its children working; the Transport goes with the
// family's last communicator.
//
// Thread safety: Post() from one thread at a time (the core serializes
// it); Split() like Post(); Abort(), Test/Wait (via Request) from any
// thread. Members marked "driver" are touched only with the Transport's
// driver lock held.
#ifndef SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_
#define SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/ucx/operation.h"
#include "backends/ucx/options.h"
#include "backends/ucx/schedule_cache.h"
#include "backends/ucx/transport.h"
#include "backends/ucx/work.h"
#include "syncline/plugin_abi.h"

namespace syncline::ucx_backend {

class Communicator {
 public:
  // Create()
  //
  // Collective over config.size ranks: builds a new Transport (this rank's
  // worker address published through config.store), and proves the paths
  // to its ring neighbours with a hello message (the others are proven by
  // the first op that uses them). Blocks until then or config.timeout_ms; on failure
  // `err` names the missing or unreachable ranks and what to change.
  static sl_result_t Create(const sl_comm_config_t& config,
                            std::unique_ptr<Communicator>* comm, sl_error_t* err);

  // Split()
  //
  // comm_split: collective over this communicator. Allgathers (color, key)
  // over it and builds this rank's new group on the same Transport: no new
  // worker, no store traffic, no wire-up. `*child` is null when color < 0.
  // Only if the family has run out of tag spaces (tag.h) does the group get
  // a fresh Transport through `store`, exactly as Create() would. Splits of
  // communicators of one family must not run concurrently on one rank
  // (that fails with SL_ERR_INVALID_ARGUMENT).
  sl_result_t Split(int32_t color, int32_t key, const sl_store_t* store, uint64_t comm_id,
                    std::unique_ptr<Communicator>* child, sl_error_t* err);

  // Fails unfinished ops with SL_ERR_ABORTED and leaves the Transport
  // (destroying it if this was the family's last communicator).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Post()
  //
  // Validates `op`, builds its schedule and queues it; never blocks on
  // peers. Invalid ops, and collectives after a failure or an abort, fail
  // at once with the reason in `err`.
  sl_result_t Post(const sl_op_t& op, std::shared_ptr<Request>* request, sl_error_t* err) {
    return PostLabeled(op, "", request, err);
  }

  // Abort(): see the file comment. Idempotent.
  void Abort();

  // For the Transport's driver (driver lock held): moves queued ops to the
  // running lists; runs one pass over this communicator's ops; the earliest
  // deadline among them; a transport rank died.
  void TakeIncoming();
  void Advance(Clock::time_point now);
  Clock::time_point NextDeadline() const;
  void PeerDied(int trank, const std::string& why);
  void PeerConnected(int trank, ucp_ep_h ep);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::shared_ptr<Transport>& transport() const { return transport_; }

 private:
  // `members[r]` is the transport rank of this communicator's rank r;
  // `on_host` of them share this machine.
  Communicator(std::shared_ptr<Transport> transport, std::vector<int> members, int rank,
               int on_host, uint32_t space, uint64_t comm_id, int64_t timeout_ms,
               const Options& options, std::string options_text);
  // Queues the connections `schedule` needs that this communicator has not
  // asked for yet (Transport::Prepare).
  sl_result_t PreparePeers(const Schedule& schedule, const sl_op_t& op, std::string* error);
  sl_result_t PostLabeled(const sl_op_t& op, const std::string& label,
                          std::shared_ptr<Request>* request, sl_error_t* err);
  sl_result_t Hello(Clock::time_point deadline, std::string* error);
  std::string Where() const;

  // advance.cc: everything below runs with the driver lock held.
  void AdvanceCollectives(Clock::time_point now);
  void AdvancePointToPoint(Clock::time_point now);
  void FailCollectives(sl_result_t code, const std::string& message);
  void FailOp(std::unique_ptr<Operation> op, sl_result_t code, const std::string& message);
  void FinishOp(std::unique_ptr<Operation> op);
  // Failure notices (notice.cc): when a collective fails here, every peer
  // is told at once, so ranks that only wait on the failed one transitively
  // fail now rather than at their deadline.
  void PostNoticeRecv();
  // After Abort(): tells the peers once (an abort fails them too).
  void NoticeAbort();
  void SendNotice(const std::string& reason);
  static void OnNotice(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                       void* user);

  const int rank_;
  const int size_;
  const uint32_t space_;  // tag space on the shared worker (tag.h)
  const uint64_t comm_id_;
  const int64_t timeout_ms_;  // the default op deadline (config.timeout_ms)
  const Options options_;
  const std::string options_text_;  // for a child that needs a fresh Transport
  const std::shared_ptr<Transport> transport_;
  const std::vector<int> members_;   // transport rank of each rank
  std::vector<int> rank_of_;         // rank of each transport rank, or -1
  std::vector<ucp_ep_h> eps_;        // by rank, null until connected (driver);
                                     // owned by the Transport
  std::vector<char> prepared_;       // by rank: Prepare() asked (Post() only)
  bool creator_ = false;             // made by Create(): its store feeds the Transport
  Wire wire_;
  bool oversubscribed_ = false;  // more members on this host than CPUs

  // Driver-owned.
  std::deque<std::unique_ptr<Operation>> collectives_;
  std::vector<std::unique_ptr<Operation>> p2p_;
  std::vector<std::string> dead_;  // by rank, "" while alive
  bool any_dead_ = false;
  // The posted notice receive (owned here until the communicator goes).
  std::unique_ptr<NoticeSlot> notice_ = std::make_unique<NoticeSlot>();
  // The driver's copy of "a collective failed"; Post() reads broken_code_.
  bool driver_broken_ = false;

  std::mutex mu_;
  std::vector<std::unique_ptr<Operation>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Request>> pending_ ABSL_GUARDED_BY(mu_);
  sl_result_t broken_code_ ABSL_GUARDED_BY(mu_) = SL_OK;
  std::string broken_message_ ABSL_GUARDED_BY(mu_);
  // Set (under mu_) once broken_code_ is: Post() checks it without the lock.
  std::atomic<bool> broken_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> aborted_{false};

  uint64_t collective_seq_ = 0;  // Post() only (serialized by the core)
  ScheduleCache schedules_;      // Post() only
};

}  // namespace syncline::ucx_backend

#endif  // SYNCLINE_BACKENDS_UCX_COMMUNICATOR_H_
