// work.h: one posted op of the MPI backend (the request behind sl_request_t)
// and the state a communicator shares with its ops.
//
// A Request holds the op, its MPI requests (from MPI_Iallreduce, MPI_Ibcast,
// ..., or the two of one step of the backend's own small allreduce, below),
// its OpClock and its OpOutcome (the plugin SDK's completion). MPI finishes
// a non-blocking op only when someone calls into it, so the threads that ask
// about the op drive it: request_test and request_wait call MPI_Testall on
// it, which also advances every other pending op of the process.
//
// Small allreduces (at most allreduce_small_max bytes, 2 KiB unless the
// backend option says otherwise, on a power-of-two number
// of ranks, 2 or more) do not go through MPI_Iallreduce: libnbc builds a
// schedule per call, about 0.5 us of an 8-byte op on this machine's
// OpenMPI 4.1. They run recursive doubling instead, over MPI_Irecv and
// MPI_Isend on the communicator's own MPI communicator for it
// (CommState::algo_comm): at step k each rank swaps its partial result with
// rank ^ 2^k and reduces the two with MPI_Reduce_local. Every rank reduces
// the same pairs (the ops are commutative), so all ranks get the same bits.
// Each such op has a tag range of its own (its number among them, equal on
// every rank since every rank posts the same collectives in the same
// order), so two in flight never take each other's messages, whichever
// thread advances which first.
// Allgathers up to allgather_small_max bytes received (4 MiB unless the
// backend option says otherwise) on 2 or more ranks skip MPI_Iallgather
// too: libnbc's against coll/tuned's blocking one cost 2-4x from 64 KiB up
// here (README.md). They run a ring over the same MPI_Irecv/MPI_Isend pair
// per step (PostAllgatherStep), one tag per op from the same count.
// Reduce_scatters up to reduce_scatter_own_max bytes of input (all blocks;
// every size unless the backend option says otherwise) on 2 ranks, and
// from kReduceScatterRingMin bytes on on more, skip
// MPI_Ireduce_scatter_block: a ring (PostReduceScatterStep), on 2 ranks one
// exchange, one tag per op from the same count.
// Broadcasts up to broadcast_own_max bytes (every size unless the backend
// option says otherwise) skip MPI_Ibcast as well (PostBroadcastStep): on 2
// ranks one message, root to peer, straight from and into the user's
// buffer; on more, up to kBroadcastTreeMax bytes, a binomial tree (above
// it libnbc's MPI_Ibcast was faster here: README.md, "Broadcasts without
// libnbc"). One tag per op from the same count.
// An op's clock (OpClock) is read first when a thread first checks its
// deadline: its waiter from its 64th MPI_Test on, a test, another waiter
// driving the pending ops, or the progress thread at its second look (so
// within twice kProgressIdleMax, communicator.h). Its deadline counts from
// then (or from when the collective before it finished, if later). Most
// small ops finish within their waiter's first 64 tests and read no clock at
// all: a read cost 33 ns on an AMD EPYC VM, a tenth of a 1-rank 8-byte op's
// path there. A deadline thus starts a little after posting, never before.
// Whoever sees the op's deadline pass reports SL_ERR_TIMEOUT and aborts the
// communicator (MPI cannot cancel a collective; README.md); a receive is
// cancelled instead (MPI_Cancel), and its communicator stays usable.
//
// A Request is shared by the caller's handle and the communicator's pending
// list, so request_free while the op runs frees nothing MPI still uses; it
// may also outlive its communicator (CommState, shared, outlives both).
//
// Thread safety: every method may be called from any thread. One MPI_Test
// runs at a time per request (MPI forbids two threads completing the same
// request).
#ifndef SYNCLINE_BACKENDS_MPI_WORK_H_
#define SYNCLINE_BACKENDS_MPI_WORK_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/completion.h"
#include "syncline/plugin_sdk/op_clock.h"

namespace syncline::mpi_backend {

class Request;
using Clock = std::chrono::steady_clock;

// The largest allreduce (bytes) that runs as the backend's own recursive
// doubling rather than MPI_Iallreduce (above; README.md, "Performance"), by
// default; the backend option allreduce_small_max=BYTES sets it (0: never).
constexpr size_t kSmallAllreduceBytes = 2048;

// The largest allgather (bytes received, all blocks) that runs as the
// backend's own ring rather than MPI_Iallgather (README.md, "Allgathers
// without libnbc"), by default; the backend option allgather_small_max=BYTES
// sets it (0: never).
constexpr size_t kSmallAllgatherBytes = size_t{4} << 20;

// The largest reduce_scatter (bytes of input, all blocks) that runs as the
// backend's own ring rather than MPI_Ireduce_scatter_block (README.md,
// "Reduce_scatters without libnbc"), by default: every size; the backend
// option reduce_scatter_own_max=BYTES sets it (0: never).
constexpr size_t kOwnReduceScatterBytes = ~size_t{0};
// On 3 or more ranks the ring runs from this many bytes of input on only:
// below it libnbc's was as fast or faster here (the README's measurements).
constexpr size_t kReduceScatterRingMin = size_t{256} << 10;

// The largest broadcast (bytes) that runs as the backend's own (one message
// on 2 ranks, a binomial tree on more) rather than MPI_Ibcast, by default:
// every size (README.md, "Broadcasts without libnbc"); the backend option
// broadcast_own_max=BYTES sets it (0: never).
constexpr size_t kOwnBroadcastBytes = ~size_t{0};
// On 3 or more ranks, the own broadcast's limit whatever the option says:
// above it libnbc's MPI_Ibcast was faster (the README's measurements).
constexpr size_t kBroadcastTreeMax = size_t{16} << 10;

// What a communicator shares with its ops: the MPI communicator, who we are,
// and whether it was aborted (and why).
struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  // The largest allreduce run as the small allreduce (Request), in bytes.
  size_t allreduce_small_max = kSmallAllreduceBytes;
  // The largest allgather run as the backend's own ring (Request), in bytes.
  size_t allgather_small_max = kSmallAllgatherBytes;
  // The largest reduce_scatter run as the backend's own ring (Request), in
  // bytes of input.
  size_t reduce_scatter_own_max = kOwnReduceScatterBytes;
  // The largest broadcast run as the backend's own (Request), in bytes.
  size_t broadcast_own_max = kOwnBroadcastBytes;

  // The point-to-point traffic of the backend's own algorithms (the small
  // allreduce), apart from the user's sends and MPI's collectives.
  MPI_Comm algo_comm = MPI_COMM_NULL;

  std::mutex mu;
  // Small allreduces, allgathers, reduce_scatters and broadcasts posted so
  // far (the backend's own algorithms): the next one's tags (Request).
  uint64_t algo_ops ABSL_GUARDED_BY(mu) = 0;
  // Set once; later posts fail with abort_message.
  std::atomic<bool> aborted{false};
  std::string abort_message ABSL_GUARDED_BY(mu);
  // Ops posted and not known to be done, oldest first.
  std::deque<std::shared_ptr<Request>> pending ABSL_GUARDED_BY(mu);
  // The latest collective: the next one's deadline starts when it is done.
  std::shared_ptr<Request> last_collective ABSL_GUARDED_BY(mu);
  // True once some op was left to MPI unfinished (timed out or aborted):
  // the MPI communicator can then never be freed.
  bool ops_left_in_mpi ABSL_GUARDED_BY(mu) = false;
  // The communicator's store while it lives (null after destruction): a
  // rank that destroys its communicator says so there ("mpi/left"), so that
  // a peer still waiting on it fails with SL_ERR_PEER instead of waiting
  // for its deadline (MPI itself does not notice a peer that left).
  const sl_store_t* store ABSL_GUARDED_BY(mu) = nullptr;

  // Threads inside request_wait on this communicator's ops, past their
  // first 64 tests (Request::Wait): while there is one, it drives MPI and
  // the progress thread stays out of its way.
  std::atomic<int> waiters{0};

  // One step of every pending op but `except` (the oldest 64): a waiter's
  // turn at the others (Request::Wait). A small allreduce moves on only
  // when its own request is tested (MPI_Iallreduce's schedules move inside
  // any MPI call), and a peer may be waiting for it first.
  void AdvancePending(const Request* except);

  // Ranks that destroyed the communicator, "" if none (or no store).
  std::string RanksThatLeft();
  // Says in the store that this rank left (the destructor).
  void Leave();

  // Fails every pending op with SL_ERR_ABORTED and `message`, and every
  // later post; the first call's message wins. `except` (the op that timed
  // out) is left to its own outcome.
  void Abort(const std::string& message, const Request* except = nullptr);
};

class Request {
 public:
  // `op` is copied (its buffers are views the caller keeps alive). `prev`:
  // the collective posted before this one on the communicator (its end is
  // when this one's deadline starts), or null; held only while it runs.
  Request(const sl_op_t& op, std::shared_ptr<CommState> comm,
          const std::shared_ptr<Request>& prev);

  const sl_op_t& op() const { return op_; }
  // "mpi allreduce #5 (f32 x 1001, sum) on rank 0 of 3", for messages.
  std::string Describe() const;

  // Where the op's data goes into MPI: the send buffer, or a private copy
  // of it when it overlaps the receive buffer in a way MPI does not allow.
  const void* SendData();

  // Hands the started MPI request over (Post, after the MPI call).
  void Started(MPI_Request request);

  // True when `op` on `comm` runs as the backend's small allreduce.
  static bool IsSmallAllreduce(const sl_op_t& op, const CommState& comm);
  // Starts the small allreduce (its first step); `number` is its place among
  // the communicator's small allreduces. MPI's return code.
  int StartSmallAllreduce(uint64_t number);
  // True when `op` on `comm` runs as the backend's own allgather: a ring
  // over MPI_Isend/MPI_Irecv on algo_comm (on 2 ranks one exchange of the
  // own block, sent straight from the input).
  static bool IsSmallAllgather(const sl_op_t& op, const CommState& comm);
  // Starts it (its first step); `number` as for StartSmallAllreduce (the
  // same count: the two kinds share the tag ranges). MPI's return code.
  int StartSmallAllgather(uint64_t number);
  // True when `op` on `comm` runs as the backend's own reduce_scatter ring.
  static bool IsOwnReduceScatter(const sl_op_t& op, const CommState& comm);
  // Starts it (its first step); `number` as for StartSmallAllreduce (the
  // same count). MPI's return code.
  int StartOwnReduceScatter(uint64_t number);
  // True when `op` on `comm` runs as the backend's own broadcast (work.h's
  // opening comment).
  static bool IsOwnBroadcast(const sl_op_t& op, const CommState& comm);
  // Starts it (its first step); `number` as for StartSmallAllreduce (the
  // same count). MPI's return code.
  int StartOwnBroadcast(uint64_t number);

  // The progress thread's look at the op (communicator.h): true when it
  // had looked before, and the op is then its to drive.
  bool SeenByProgress() const { return seen_by_progress_.exchange(true); }

  bool Complete(sl_result_t code, std::string message) {
    return outcome_.Complete(code, std::move(message));
  }
  bool done() const { return outcome_.done(); }

  // request_test / request_wait (plugin_abi.h).
  sl_result_t Test(int* done, sl_error_t* err) const;
  sl_result_t Wait(int64_t timeout_ms, sl_error_t* err) const;

  // One step: MPI_Test the op, finish it if MPI has, and (with
  // `check_deadline`) enforce its deadline and notice a peer that left.
  // True once the outcome is in. Returns at once if another thread is
  // testing it.
  bool Advance(bool check_deadline = true) const;

 private:
  // The small allreduce's step `step_`: receive the partner's partial
  // result into scratch_, send ours.
  int PostStep() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The own allgather's ring step `step_`: receive block rank-step-1 from
  // the left neighbour, send block rank-step (the input at step 0) to the
  // right one. One tag for every step: messages between two ranks on one
  // communicator and tag arrive in the order they were sent.
  int PostAllgatherStep() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One step of a ring: receive `count` elements into `from_left` from the
  // left neighbour, send `to_right` to the right one, on the op's tag
  // (requests_[0] and [1]).
  int PostRingStep(void* from_left, const void* to_right, int count,
                   MPI_Datatype type) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The own reduce_scatter's ring step s = `step_` of size-1: send the
  // partial sum of block rank-s-1 (at s = 0 the input's block) to the right
  // neighbour, receive the left one's of block rank-s-2 into the scratch
  // half s % 2 (at the last step, block rank, into the output); StepDone
  // adds the input's block to it. The partial sent at s is the one
  // received at s-1, in the other half.
  int PostReduceScatterStep() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The own broadcast's step `step_`, a binomial tree over this rank's
  // place v = rank - root (mod size): step 0 receives the whole buffer from
  // the parent (v less its lowest set bit; the root skips it), each later
  // step sends it to up to two children (v + 2^k below the parent's
  // distance, the farthest first). Posts nothing once this rank is done.
  int PostBroadcastStep() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called with mu_ held once MPI finished the step: reduces the partner's
  // part in, starts the next step; true when there is none (the op is done).
  bool StepDone(int* rc) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called with mu_ held once MPI finished the op: AVG's division, then the
  // outcome.
  void Finish(const MPI_Status& status) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deadline passed: cancel a receive, abort the communicator otherwise.
  void TimeOut() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (and the op failed with SL_ERR_PEER) when a peer left the
  // communicator and the op has not finished within a grace period since.
  bool PeerGone(Clock::time_point now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const sl_op_t op_;
  const std::shared_ptr<CommState> comm_;
  mutable backend::OpClock clock_;
  // True once a thread checked the op's deadline (Advance): the clock's
  // posting time is that first look.
  mutable bool looked_ ABSL_GUARDED_BY(mu_) = false;
  mutable backend::OpOutcome outcome_;
  mutable std::mutex mu_;
  // requests_[0] is the op's MPI request; a small allreduce's step has two
  // (its receive, then its send; either may be MPI_REQUEST_NULL in a
  // broadcast's).
  mutable MPI_Request requests_[2] ABSL_GUARDED_BY(mu_) = {MPI_REQUEST_NULL,
                                                           MPI_REQUEST_NULL};
  mutable int num_requests_ ABSL_GUARDED_BY(mu_) = 1;
  // The small allreduce or allgather: its step, first tag, and (allreduce)
  // the partner's part; (allgather) where the own block is sent from.
  mutable int step_ ABSL_GUARDED_BY(mu_) = -1;
  int tag_base_ = 0;
  // The partner's part lands in scratch_: inline_scratch_ up to
  // kInlineScratch bytes (the 8-byte allreduce's path allocates nothing for
  // it), heap_scratch_ above (left uninitialized; the reduce_scatter ring's
  // two halves on 3 or more ranks).
  static constexpr size_t kInlineScratch = 64;
  alignas(16) unsigned char inline_scratch_[kInlineScratch];
  std::unique_ptr<unsigned char[]> heap_scratch_;
  unsigned char* scratch_ = nullptr;
  mutable std::shared_ptr<Request> prev_ ABSL_GUARDED_BY(mu_);
  // Waits on peers: when a peer was last looked for in the store, and when
  // one was first seen gone (the op gets a grace period to finish).
  mutable Clock::time_point next_peer_check_ ABSL_GUARDED_BY(mu_);
  mutable Clock::time_point peer_gone_since_ ABSL_GUARDED_BY(mu_);
  std::vector<unsigned char> send_copy_;
  // Where the own algorithm reads its input: the allgather's own block,
  // the reduce_scatter's blocks (SendData()).
  const void* own_block_ = nullptr;
  // The own broadcast: the distance to the next child to send to, 0 when
  // none is left.
  mutable int next_child_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::atomic<bool> seen_by_progress_{false};
};

}  // namespace syncline::mpi_backend

// The opaque handle of the C ABI: one per request_* caller.
struct sl_request {
  std::shared_ptr<syncline::mpi_backend::Request> request;
};

#endif  // SYNCLINE_BACKENDS_MPI_WORK_H_
