// communicator.h: the collective interface.
//
// A Communicator is a group of ranks that run collectives together. It wraps
// a backend plugin (gloo, ucx, nccl) loaded at run time, optionally stacked
// with interposers (trace, check, faults); callers never see the plugin's C
// table.
//
// Semantics every backend honours:
//  - Every rank issues the same ops in the same order. Each op gets the next
//    sequence number (1, 2, ...) and that number appears in every error.
//  - Ops are asynchronous and return a Work. Buffers must stay valid until the
//    Work completes.
//  - Every op has a deadline (OpOptions::timeout, or the communicator's
//    default). A dead or wedged peer becomes an error, never a hang. The
//    deadline counts from when the op can start: ops run in order, so from
//    when the op before it has finished on this rank. Posting many ops at
//    once does not make the later ones time out.
//  - Results are deterministic for a given backend, world size and input.
//
// Thread safety: posting ops is serialized internally, but ops must still be
// posted in the same order on every rank, so post from one thread.
//
// Example (4 processes under `syncline-run -n 4`):
//   SL_ASSIGN_OR_RETURN(auto comm, syncline::Communicator::Create({}));
//   std::vector<float> x(1024, comm->rank());
//   SL_ASSIGN_OR_RETURN(auto work, comm->Allreduce(syncline::View(x), {}));
//   SL_RETURN_IF_ERROR(work->Wait());   // x[i] == 0+1+2+3
#ifndef SYNCLINE_COMMUNICATOR_H_
#define SYNCLINE_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "syncline/store.h"
#include "syncline/types.h"
#include "syncline/work.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline {

class Backend;  // core-internal: a loaded (and possibly wrapped) plugin table

// Per-op options. A zero timeout means "the communicator's default".
struct OpOptions {
  absl::Duration timeout = absl::ZeroDuration();
};
struct AllreduceOptions : OpOptions {
  ReduceOp op = ReduceOp::kSum;
};
struct BroadcastOptions : OpOptions {
  int root = 0;
};
struct ReduceOptions : OpOptions {
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};
struct AllgatherOptions : OpOptions {};
struct ReduceScatterOptions : OpOptions {
  ReduceOp op = ReduceOp::kSum;
};
struct AlltoallOptions : OpOptions {};
struct BarrierOptions : OpOptions {};
struct SendRecvOptions : OpOptions {
  uint32_t tag = 0;
};

// CommunicatorOptions
//
// Everything unset is taken from the environment (see env.h and
// rendezvous.h): rank and size from SYNCLINE_*/torchrun/Slurm/OpenMPI
// variables, the backend from SYNCLINE_BACKEND, interposers from
// SYNCLINE_PLUGINS, timeouts from SYNCLINE_TIMEOUT.
struct CommunicatorOptions {
  int rank = -1;                       // -1: from the environment
  int world_size = -1;                 // -1: from the environment
  std::string backend;                 // "": SYNCLINE_BACKEND (default auto)
  std::vector<std::string> plugins;    // empty: SYNCLINE_PLUGINS
  Device device = Device::Cpu();       // the device the buffers will live on
  absl::Duration timeout = absl::ZeroDuration();  // 0: SYNCLINE_TIMEOUT
  std::shared_ptr<Store> store;        // null: rendezvous from the environment
  // "key=value;..." passed to the plugin. SYNCLINE_<BACKEND>_OPTIONS (e.g.
  // SYNCLINE_UCX_OPTIONS="busy_poll_us=0;chunk_bytes=1m") is appended, so a
  // key set in the environment overrides the same key set here.
  std::string backend_options;
};

class Communicator {
 public:
  // Create()
  //
  // Rendezvous, load the backend, check that every rank chose the same backend
  // and ABI version, and connect. Blocks until all ranks have joined or the
  // timeout; the error then names the ranks that did not join.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const CommunicatorOptions& options);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }
  absl::Duration timeout() const { return timeout_; }
  // The backend's name, e.g. "gloo"; with interposers, "trace+gloo".
  const std::string& backend_name() const;
  // The sequence number the next collective will get.
  uint64_t next_seq() const { return next_seq_; }
  // Send/Recv are numbered separately (they need not match across ranks);
  // their sequence numbers carry this bit.
  static constexpr uint64_t kP2pSeqBit = uint64_t{1} << 62;
  // The store this communicator was bootstrapped with (scoped to it).
  std::shared_ptr<Store> store() const { return store_; }

  // The flight recorder of this communicator as JSON: its last ops with
  // sequence number, description, bytes, state and times. Also written to
  // $SYNCLINE_DEBUG_DIR on an op timeout and on SIGUSR1.
  std::string DumpFlightRecorder() const;

  // Whether the backend can reduce `dtype` with `op` on `device`.
  bool SupportsReduce(DataType dtype, ReduceOp op, Device device) const;

  // In-place allreduce (`buffer` is input and output) and out-of-place.
  absl::StatusOr<std::unique_ptr<Work>> Allreduce(
      BufferView buffer, const AllreduceOptions& options = {});
  absl::StatusOr<std::unique_ptr<Work>> Allreduce(
      BufferView send, BufferView recv, const AllreduceOptions& options = {});
  // In place: the root's `buffer` is copied to every rank's `buffer`.
  absl::StatusOr<std::unique_ptr<Work>> Broadcast(
      BufferView buffer, const BroadcastOptions& options = {});
  // `recv` is written on the root only (it may alias `send`).
  absl::StatusOr<std::unique_ptr<Work>> Reduce(
      BufferView send, BufferView recv, const ReduceOptions& options = {});
  // recv.count == send.count * size(); rank i's block lands at i*send.count.
  absl::StatusOr<std::unique_ptr<Work>> Allgather(
      BufferView send, BufferView recv, const AllgatherOptions& options = {});
  // send.count == recv.count * size(); recv gets this rank's reduced block.
  absl::StatusOr<std::unique_ptr<Work>> ReduceScatter(
      BufferView send, BufferView recv,
      const ReduceScatterOptions& options = {});
  // Both hold size() blocks; block j of send goes to rank j.
  absl::StatusOr<std::unique_ptr<Work>> Alltoall(
      BufferView send, BufferView recv, const AlltoallOptions& options = {});
  absl::StatusOr<std::unique_ptr<Work>> Barrier(
      const BarrierOptions& options = {});
  // Point to point. Send and Recv do not consume collective order, but they do
  // get a sequence number for diagnostics.
  absl::StatusOr<std::unique_ptr<Work>> Send(
      BufferView buffer, int peer, const SendRecvOptions& options = {});
  absl::StatusOr<std::unique_ptr<Work>> Recv(
      BufferView buffer, int peer, const SendRecvOptions& options = {});

  // Split()
  //
  // Collective over this communicator. Ranks with the same `color` form a new
  // communicator, ordered by (key, old rank). A negative color means "not in
  // any group": the result is then nullptr. Where the backend can split a
  // communicator itself (UCX), the new one reuses this one's connections
  // (no new wire-up); otherwise it is created anew through the store. Either
  // way it is independent: this one and it may be destroyed in either order.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key);

  // Abort()
  //
  // Fails every pending op with AbortedError and makes later ops fail at once.
  // Safe from any thread (e.g. a watchdog).
  absl::Status Abort();

 public:
  struct Impl;  // core-internal state (defined in core/src)

 private:
  Communicator(std::unique_ptr<Impl> impl, int rank, int size, Device device,
               absl::Duration timeout, std::shared_ptr<Store> store);
  absl::StatusOr<std::unique_ptr<Work>> Post(int kind, BufferView send,
                                             BufferView recv, int redop,
                                             int root, int peer, uint32_t tag,
                                             absl::Duration timeout);

  std::unique_ptr<Impl> impl_;
  int rank_;
  int size_;
  Device device_;
  absl::Duration timeout_;
  std::shared_ptr<Store> store_;
  uint64_t next_seq_ = 1;      // collectives
  uint64_t next_p2p_seq_ = 1;  // send/recv, reported as kP2pSeqBit | n
};

}  // namespace syncline

#pragma GCC visibility pop

#endif  // SYNCLINE_COMMUNICATOR_H_
