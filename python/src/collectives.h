// collectives.h: PyTorch's collectives over one syncline::Communicator.
//
// The torch-version-neutral half of the c10d backend: each method takes the
// tensors and c10d options that PyTorch's process-group API passes, checks
// them (tensor_args.h), posts Syncline ops and returns a TorchWork. The
// version glue (process_group.cc) only forwards to it.
//
// Where Syncline has no op of the same shape, it composes one, in collective
// order on every rank:
//   gather         an allgather; the root keeps the blocks
//   scatter        a broadcast of the root's blocks; each rank keeps its own
//   alltoall with  an allgather of every rank's send and receive counts
//   split sizes    (checked against each other, then waited for), then one
//                  alltoall padded to the largest block
// Non-contiguous tensors are staged through contiguous copies. An allgather
// (and gather) into output tensors that are the back-to-back chunks of one
// contiguous tensor writes straight into them; into other lists it goes
// through a reused staging buffer and copies out.
//
// Threading: ops are posted from one thread at a time (PyTorch's caller).
// Each returns a TorchWork that completes on the thread that waits for it,
// or on the Completer's thread (work.h says which).
#ifndef SYNCLINE_PYTHON_COLLECTIVES_H_
#define SYNCLINE_PYTHON_COLLECTIVES_H_

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "syncline/communicator.h"
#include "work.h"

namespace syncline::torch_backend {

using TensorList = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

class Collectives {
 public:
  // Creates the Communicator over PyTorch's `store` (blocks until every rank
  // has joined or `timeout`). The backend and interposers come from
  // SYNCLINE_BACKEND and SYNCLINE_PLUGINS, as in C++; `timeout` is every
  // op's default deadline. Throws c10::Error naming what failed.
  Collectives(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
              std::chrono::milliseconds timeout);
  ~Collectives();  // Close()s first

  // Close()
  //
  // Completes every posted op (each has a deadline), whether or not anyone
  // waits for it, so that none is cut off by the Communicator's end; then
  // stops the Completer, whose thread may run Future callbacks: call it
  // without the GIL. Later ops must not be posted. Idempotent.
  void Close();

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  uint64_t next_seq() const { return comm_->next_seq(); }

  WorkPtr Broadcast(TensorList& tensors, const c10d::BroadcastOptions& o);
  WorkPtr Allreduce(TensorList& tensors, const c10d::AllreduceOptions& o);
  WorkPtr AllreduceCoalesced(TensorList& tensors, const c10d::AllreduceCoalescedOptions& o);
  WorkPtr Reduce(TensorList& tensors, const c10d::ReduceOptions& o);
  WorkPtr Allgather(TensorLists& outputs, TensorList& inputs, const c10d::AllgatherOptions& o);
  WorkPtr AllgatherCoalesced(TensorLists& output_lists, TensorList& inputs,
                             const c10d::AllgatherOptions& o);
  WorkPtr AllgatherBase(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& o);
  WorkPtr Gather(TensorLists& outputs, TensorList& inputs, const c10d::GatherOptions& o);
  WorkPtr Scatter(TensorList& outputs, TensorLists& inputs, const c10d::ScatterOptions& o);
  WorkPtr ReduceScatter(TensorList& outputs, TensorLists& inputs,
                        const c10d::ReduceScatterOptions& o);
  WorkPtr ReduceScatterBase(at::Tensor& output, at::Tensor& input,
                            const c10d::ReduceScatterOptions& o);
  WorkPtr AlltoallBase(at::Tensor& output, at::Tensor& input,
                       std::vector<int64_t>& output_split_sizes,
                       std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& o);
  WorkPtr Alltoall(TensorList& outputs, TensorList& inputs, const c10d::AllToAllOptions& o);
  WorkPtr Barrier(const c10d::BarrierOptions& o);
  WorkPtr Send(TensorList& tensors, int dst, int tag);
  WorkPtr Recv(TensorList& tensors, int src, int tag);

  // TimeOps(op, buffer, output, iters)
  //
  // Syncline's own C++ figure, in this process, on this communicator and
  // these tensors, for bench/compare/python_split.py: `iters` ops straight
  // over the Communicator, each waited for before the next, as
  // syncline-bench-collectives times them. `op` is "allreduce" (sum, in place
  // on `buffer`), "allgather" (of `buffer` into `output`, which holds size()
  // blocks) or "broadcast" (of `buffer` from rank 0). Returns the seconds the
  // ops took; throws naming the op that failed. Tensors: contiguous, CPU,
  // float32. Call it without the GIL, from the thread that posts the ops.
  double TimeOps(const std::string& op, const at::Tensor& buffer, const at::Tensor& output,
                 int64_t iters);

 private:
  ReduceOp Reduction(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) const;
  // Appends the posted op to `op`, or throws its error.
  void Post(absl::StatusOr<std::unique_ptr<syncline::Work>> posted, PendingOp& op);
  // Posts an alltoall of `in` (1-D, contiguous) where this rank sends
  // send_counts[j] elements to rank j and receives recv_counts[i] from rank i
  // into `out` (1-D, contiguous), in rank order.
  void AlltoallV(const at::Tensor& out, const at::Tensor& in,
                 const std::vector<int64_t>& send_counts,
                 const std::vector<int64_t>& recv_counts, absl::Duration timeout,
                 PendingOp& op);
  // Allgathers `in`; then copies rank i's block into results[i] (if any).
  WorkPtr AllgatherInto(const at::Tensor& in, TensorList results,
                        std::chrono::milliseconds timeout, c10d::OpType type, const char* name);
  // A contiguous 1-D staging tensor of `numel` elements of `dtype`: a view of
  // scratch_ (grown as needed) when no posted op still uses it, else a new
  // one. Reusing it spares each staged op the allocation and the page faults
  // of fresh memory (16,384 of them for a 64 MiB allgather).
  at::Tensor Scratch(int64_t numel, at::ScalarType dtype);
  WorkPtr PointToPoint(TensorList& tensors, int peer, int tag, bool send);
  // The TorchWork of a posted op, tracked in posted_.
  WorkPtr Launch(c10d::OpType type, const char* name, TensorList outputs, PendingOp op);

  std::unique_ptr<Communicator> comm_;
  at::Tensor scratch_;  // bytes; see Scratch()
  std::shared_ptr<Completer> completer_;  // shared with the Works (work.h)
  // Every posted Work that may still be running, in posting order, for the
  // destructor. Weak: a dropped Work hands its op to the Completer itself.
  // Launch() forgets the ones that ended or went.
  std::deque<c10::weak_intrusive_ptr<TorchWork>> posted_;
  size_t compact_at_ = 0;  // posted_'s size at which Launch() sweeps all of it
};

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_COLLECTIVES_H_
