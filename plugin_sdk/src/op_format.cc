// op_format.cc: see op_format.h.
#include "syncline/plugin_sdk/op_format.h"

#include <cstdio>

namespace syncline::plugin {
namespace {

// Storage for names of out-of-range values; a per-thread buffer keeps the
// functions' const char* contract without allocating.
const char* Unknown(const char* what, int value) {
  thread_local char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%s<%d>", what, value);
  return buffer;
}

}  // namespace

// The names are plugin_abi.h's one table.
const char* OpKindName(int kind) {
  const char* name = sl_op_kind_name(static_cast<sl_op_kind_t>(kind));
  return name != nullptr ? name : Unknown("op", kind);
}

const char* DtypeName(int dtype) {
  const char* name = sl_dtype_name(static_cast<sl_dtype_t>(dtype));
  return name != nullptr ? name : Unknown("dtype", dtype);
}

const char* RedopName(int redop) {
  const char* name = sl_redop_name(static_cast<sl_redop_t>(redop));
  return name != nullptr ? name : Unknown("redop", redop);
}

bool IsCollective(sl_op_kind_t kind) { return kind != SL_OP_SEND && kind != SL_OP_RECV; }

bool Reduces(sl_op_kind_t kind) {
  return kind == SL_OP_ALLREDUCE || kind == SL_OP_REDUCE || kind == SL_OP_REDUCE_SCATTER;
}

bool HasRoot(sl_op_kind_t kind) {
  return kind == SL_OP_BROADCAST || kind == SL_OP_REDUCE;
}

const sl_buffer_t& DataBuffer(const sl_op_t& op) {
  return op.kind == SL_OP_BROADCAST || op.kind == SL_OP_RECV ? op.recv : op.send;
}

size_t OpCount(const sl_op_t& op) {
  return op.kind == SL_OP_BARRIER ? 0 : DataBuffer(op).count;
}

uint64_t OpBytes(const sl_op_t& op, int world_size) {
  const sl_buffer_t& data = DataBuffer(op);
  const uint64_t elem = sl_dtype_size(data.dtype);
  switch (op.kind) {
    case SL_OP_BARRIER:
      return 0;
    case SL_OP_ALLGATHER:
      return elem * data.count * static_cast<uint64_t>(world_size);
    default:
      return elem * data.count;  // reduce_scatter/alltoall: send is n*P already
  }
}

double BusBandwidthFactor(sl_op_kind_t kind, int world_size) {
  const double n = world_size > 0 ? world_size : 1;
  switch (kind) {
    case SL_OP_ALLREDUCE:
      return 2.0 * (n - 1) / n;
    case SL_OP_ALLGATHER:
    case SL_OP_REDUCE_SCATTER:
    case SL_OP_ALLTOALL:
      return (n - 1) / n;
    case SL_OP_BARRIER:
      return 0.0;
    default:  // broadcast, reduce, send, recv
      return 1.0;
  }
}

}  // namespace syncline::plugin

namespace syncline::backend {

std::string SlOpName(sl_op_kind_t kind, uint64_t seq) {
  std::string out = plugin::OpKindName(kind);
  if (seq & SL_SEQ_P2P_BIT) {
    out += " p2p#" + std::to_string(seq & ~SL_SEQ_P2P_BIT);
  } else if (seq & SL_SEQ_INTERPOSER_BIT) {
    out += " internal#" +
           std::to_string(seq & ~(SL_SEQ_INTERPOSER_BIT | SL_SEQ_SPLIT_BIT | SL_SEQ_CHECK_BIT));
  } else if (seq != 0) {
    out += " #" + std::to_string(seq);
  }
  return out;
}

std::string SlOpName(const sl_op_t& op) { return SlOpName(op.kind, op.seq); }

std::string SlDescribeOp(sl_op_kind_t kind, uint64_t seq, int dtype, uint64_t count,
                         int redop, int root, int peer, uint32_t tag) {
  std::string out = SlOpName(kind, seq);
  if (kind == SL_OP_BARRIER) return out;
  out += std::string(" (") + plugin::DtypeName(dtype) + " x " + std::to_string(count);
  if (plugin::Reduces(kind)) out += std::string(", ") + plugin::RedopName(redop);
  if (plugin::HasRoot(kind)) out += ", root " + std::to_string(root);
  if (kind == SL_OP_SEND || kind == SL_OP_RECV) {
    out += std::string(kind == SL_OP_SEND ? ", to rank " : ", from rank ") +
           std::to_string(peer) + ", tag " + std::to_string(tag);
  }
  return out + ")";
}

std::string SlDescribeOp(const sl_op_t& op) {
  return SlDescribeOp(op.kind, op.seq, plugin::DataBuffer(op).dtype, plugin::OpCount(op),
                      op.redop, op.root, op.peer, op.tag);
}

}  // namespace syncline::backend
