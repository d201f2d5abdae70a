// op_format.h: names, sizes and descriptions of sl_op_t, for interposers.
//
// The interposers speak only the C ABI (they cannot use the core's
// DataTypeName and friends), yet their messages must read like the core's:
// "allreduce(f32, 1048576, sum)", "broadcast(f32, 1024, root 0)". Sizes follow
// nccl-tests, so that the trace summary's busbw matches the benchmarks'.
//
// Thread safety: stateless; call from any thread.
//
// Example:
//   std::string what = DescribeOp(op);  // "reduce(f64, 10, max, root 1)"
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
// Elements per rank: allreduce/broadcast/reduce/allgather send count,
// reduce_scatter recv count, alltoall send count; 0 for barrier.
size_t OpCount(const sl_op_t& op);

// Bytes the op moves as nccl-tests counts them: the full buffer (for
// allgather the gathered result, for reduce_scatter and alltoall the whole
// send buffer).
uint64_t OpBytes(const sl_op_t& op, int world_size);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor.
double BusBandwidthFactor(sl_op_kind_t kind, int world_size);

// "allreduce(f32, 1048576, sum)", "broadcast(f32, 1024, root 0)", "barrier()".
std::string DescribeOp(sl_op_kind_t kind, int dtype, uint64_t count, int redop, int root,
                       int peer);
std::string DescribeOp(const sl_op_t& op);

}  // namespace syncline::plugin

#endif  // SYNCLINE_PLUGIN_SDK_OP_FORMAT_H_
