// op_format.h: names, sizes and the one description of sl_op_t.
//
// SlDescribeOp is how every message names an op: the core's (its context
// string), every backend's and every interposer's, so that the same op reads
// the same wherever it fails: "allreduce #17 (f32 x 1048576, sum)",
// "broadcast #3 (f32 x 1024, root 0)", "send p2p#2 (u8 x 64, to rank 3,
// tag 7)", "barrier #9". Sizes follow nccl-tests, so that the trace
// summary's busbw matches the benchmarks'.
//
// Thread safety: stateless; call from any thread.
//
// Example:
//   std::string what = SlDescribeOp(op);  // "reduce #4 (f64 x 10, max, root 1)"
#ifndef SYNCLINE_PLUGIN_SDK_OP_FORMAT_H_
#define SYNCLINE_PLUGIN_SDK_OP_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "syncline/plugin_abi.h"

namespace syncline::plugin {

// "allreduce", ..., or "op<k>" for a value outside the enum.
const char* OpKindName(int kind);
// "f32", ..., or "dtype<k>".
const char* DtypeName(int dtype);
// "sum", ..., or "redop<k>".
const char* RedopName(int redop);

// True for the ops every rank of the communicator takes part in.
bool IsCollective(sl_op_kind_t kind);
// True for ops that carry a reduce op (allreduce, reduce, reduce_scatter).
bool Reduces(sl_op_kind_t kind);
// True for ops that carry a root (broadcast, reduce).
bool HasRoot(sl_op_kind_t kind);

// The buffer that describes the op's data, as the core validates it: recv
// for broadcast and recv, send otherwise.
const sl_buffer_t& DataBuffer(const sl_op_t& op);
// The count every description of the op shows (SlDescribeOp): the data
// buffer's elements (for reduce_scatter and alltoall the whole send
// buffer, n*P); 0 for barrier.
size_t OpCount(const sl_op_t& op);

// Bytes the op moves as nccl-tests counts them: the full buffer (for
// allgather the gathered result, for reduce_scatter and alltoall the whole
// send buffer).
uint64_t OpBytes(const sl_op_t& op, int world_size);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor.
double BusBandwidthFactor(sl_op_kind_t kind, int world_size);

}  // namespace syncline::plugin

namespace syncline::backend {

// SlOpName()
//
// The head of every message about an op: "allreduce #17"; "send p2p#3" for
// a point-to-point op (SL_SEQ_P2P_BIT set, numbered on its own);
// "allgather internal#5" for an op an interposer posts for itself
// (SL_SEQ_INTERPOSER_BIT); just "allreduce" when seq is 0 (no number known).
std::string SlOpName(sl_op_kind_t kind, uint64_t seq);
std::string SlOpName(const sl_op_t& op);

// SlDescribeOp()
//
// SlOpName, then the op's shape: "allreduce #17 (f32 x 1024, sum)",
// "reduce #3 (f32 x 8, max, root 1)", "send p2p#2 (u8 x 64, to rank 3,
// tag 7)", "barrier #9"; with seq 0, "allreduce (f32 x 1024, sum)". `count`
// is the elements of the op's data buffer (DataBuffer: recv for broadcast
// and recv, send otherwise).
std::string SlDescribeOp(sl_op_kind_t kind, uint64_t seq, int dtype, uint64_t count,
                         int redop, int root, int peer, uint32_t tag);
std::string SlDescribeOp(const sl_op_t& op);

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_OP_FORMAT_H_
