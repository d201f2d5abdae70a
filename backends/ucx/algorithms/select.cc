// select.cc: which algorithm runs each op, and op validation.
//
// Switch points (Options defaults, options.h). Each is the size of one
// rank's message at or below which the latency algorithm runs.
//
// Measured with tests/backends/ucx/ucx_sweep.cc: 2 ranks, f32 sum, median
// per op through the public Communicator API including Wait, each algorithm
// forced in turn, on the 2-core reference VM on 2026-11-29 (load average
// 4-6 from other jobs in the final run, 8-13 earlier; under the higher load
// any point could jump to 200-900 us when the scheduler put both ranks on
// one core, so the crossover is a region, not a byte count):
//
//   allreduce, shared memory (UCX_TLS=posix,sysv,cma,self), us per op:
//     bytes      rd       ring
//     8          1.70     2.33
//     512        2.24     2.80
//     4 KiB      2.69     3.77
//     16 KiB    12.56     4.72     <- ring ahead from here
//     64 KiB    34.95    27.29
//     1 MiB    491.6    300.3
//     16 MiB   17329     4861      (rd moves twice the bytes per rank)
//   allreduce, tcp over loopback (UCX_TLS=tcp, auto): 9.7 us at 8 B,
//     11.4 us at 4 KiB, 61 us at 64 KiB; earlier forced runs put rd at
//     10-14 us up to 16 KiB, so the same switch point serves both.
//
//   => allreduce_small_max = 8 KiB.
//
// With 2 ranks the broadcast/reduce (tree vs chain), allgather (bruck vs
// ring) and reduce_scatter (rd vs ring) pairs exchange the same messages in
// one round, so 2 ranks cannot place those switch points; they matter for
// P > 2, where they follow the alpha-beta model with alpha ~ 2 us (the
// measured small-message cost) and ~6 GB/s: the chain pays P-2 extra
// segment latencies and saves (log2 P - 1) * N of traffic, breaking even
// near 64 KiB; ring reduce_scatter/allgather pay P-1 rounds against
// log2 P, which at alpha = 2 us outweighs their bandwidth saving below
// ~4 KiB per block.
#include <cstring>
#include <string>

#include "backends/common/reduce.h"
#include "backends/ucx/algorithms/algorithms.h"

namespace syncline::ucx_backend {
namespace {

using backend::SlDtypeName;
using backend::SlIsValidDtype;
using backend::SlIsValidRedop;
using backend::SlOpKindName;

std::string Head(const sl_op_t& op) {
  return std::string(SlOpKindName(op.kind)) + " #" + std::to_string(op.seq);
}

bool BufferOk(const sl_buffer_t& b) { return b.count == 0 || b.data != nullptr; }

}  // namespace

size_t SegmentElems(const Options& options, size_t elem) {
  const size_t n = options.chunk_bytes / (elem == 0 ? 1 : elem);
  return n == 0 ? 1 : n;
}

sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, std::string* message) {
  if (static_cast<int>(op.kind) < 0 || op.kind >= SL_OP_KIND_COUNT) {
    *message = "unknown op kind " + std::to_string(static_cast<int>(op.kind));
    return SL_ERR_INVALID_ARGUMENT;
  }
  const std::string head = Head(op);
  const bool sends = op.kind != SL_OP_BROADCAST && op.kind != SL_OP_RECV &&
                     op.kind != SL_OP_BARRIER;
  const bool recvs = op.kind != SL_OP_SEND && op.kind != SL_OP_BARRIER &&
                     !(op.kind == SL_OP_REDUCE && rank != op.root);
  for (const sl_buffer_t* b : {sends ? &op.send : nullptr, recvs ? &op.recv : nullptr}) {
    if (b == nullptr) continue;
    if (b->device != SL_DEVICE_CPU) {
      *message = head + ": the ucx backend supports CPU buffers only, not " +
                 (b->device == SL_DEVICE_CUDA ? "CUDA" : "this device") +
                 " memory; for CUDA use SYNCLINE_BACKEND=nccl";
      return SL_ERR_UNSUPPORTED;
    }
    if (!SlIsValidDtype(b->dtype)) {
      *message = head + ": invalid dtype " + std::to_string(static_cast<int>(b->dtype));
      return SL_ERR_INVALID_ARGUMENT;
    }
    if (!BufferOk(*b)) {
      *message = head + ": null data pointer with a non-zero count";
      return SL_ERR_INVALID_ARGUMENT;
    }
  }
  if (sends && recvs && op.send.dtype != op.recv.dtype) {
    *message = head + ": send is " + SlDtypeName(op.send.dtype) + " but recv is " +
               SlDtypeName(op.recv.dtype);
    return SL_ERR_INVALID_ARGUMENT;
  }
  const bool reduces = op.kind == SL_OP_ALLREDUCE || op.kind == SL_OP_REDUCE ||
                       op.kind == SL_OP_REDUCE_SCATTER;
  if (reduces && !SlIsValidRedop(op.redop)) {
    *message = head + ": invalid reduce op " + std::to_string(static_cast<int>(op.redop));
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_BROADCAST || op.kind == SL_OP_REDUCE) &&
      (op.root < 0 || op.root >= size)) {
    *message = head + ": root " + std::to_string(op.root) + " is not in a group of " +
               std::to_string(size);
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) &&
      (op.peer < 0 || op.peer >= size || op.peer == rank)) {
    *message = head + ": peer " + std::to_string(op.peer) +
               " must be another rank of a group of " + std::to_string(size);
    return SL_ERR_INVALID_ARGUMENT;
  }
  const size_t n = op.send.count, m = op.recv.count, p = static_cast<size_t>(size);
  bool shape_ok = true;
  switch (op.kind) {
    case SL_OP_ALLREDUCE: shape_ok = n == m; break;
    case SL_OP_REDUCE: shape_ok = rank != op.root || n == m; break;
    case SL_OP_ALLGATHER: shape_ok = m == n * p; break;
    case SL_OP_REDUCE_SCATTER: shape_ok = n == m * p; break;
    case SL_OP_ALLTOALL: shape_ok = n == m && n % p == 0; break;
    default: break;
  }
  if (!shape_ok) {
    *message = head + ": send has " + std::to_string(n) + " and recv " +
               std::to_string(m) + " elements, which does not fit the op on " +
               std::to_string(size) + " ranks (see plugin_abi.h)";
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

Schedule SelectSchedule(const AlgoArgs& args) {
  const sl_op_t& op = *args.op;
  const Options& o = *args.options;
  if (op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) return BuildPointToPoint(args);
  if (args.size == 1) return BuildLocal(args);
  const size_t elem = sl_dtype_size(op.kind == SL_OP_REDUCE ? op.send.dtype : op.recv.dtype);
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
      return op.recv.count * elem <= o.allreduce_small_max
                 ? BuildAllreduceRecursiveDoubling(args)
                 : BuildAllreduceRing(args);
    case SL_OP_BROADCAST:
      return op.recv.count * elem <= o.broadcast_small_max ? BuildBroadcastBinomial(args)
                                                           : BuildBroadcastChain(args);
    case SL_OP_REDUCE:
      return op.send.count * elem <= o.reduce_small_max ? BuildReduceBinomial(args)
                                                        : BuildReduceChain(args);
    case SL_OP_ALLGATHER:
      return op.send.count * elem <= o.allgather_small_max ? BuildAllgatherBruck(args)
                                                           : BuildAllgatherRing(args);
    case SL_OP_REDUCE_SCATTER:
      return op.recv.count * elem <= o.reduce_scatter_small_max
                 ? BuildReduceScatterRecursiveDoubling(args)
                 : BuildReduceScatterRing(args);
    case SL_OP_ALLTOALL:
      return BuildAlltoallPairwise(args);
    case SL_OP_BARRIER:
    default:
      return BuildBarrierDissemination(args);
  }
}

}  // namespace syncline::ucx_backend
