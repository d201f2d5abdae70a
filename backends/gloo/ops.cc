#include "backends/gloo/ops.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/context.h"
#include "gloo/reduce.h"
#include "gloo/transport/unbound_buffer.h"
#include "syncline/plugin_sdk/reduce.h"
#include "syncline/plugin_sdk/validate.h"

namespace syncline::gloo_backend {
namespace {

using backend::SlDivideBy;

// Point-to-point slots live far above Gloo's collective slot prefixes
// (Slot::build puts an 8-bit prefix in the top byte), so a user tag can never
// collide with a collective's slot.
constexpr uint64_t kP2pSlotBase = 0xf0ull << 56;

// A 64-bit mix (splitmix64's finalizer) of the fields that every rank
// must agree on.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Elements per rank, as every rank passes it (see plugin_abi.h).
uint64_t PerRankCount(const sl_op_t& op) {
  return op.kind == SL_OP_BROADCAST || op.kind == SL_OP_RECV || op.kind == SL_OP_REDUCE_SCATTER
             ? op.recv.count
             : op.send.count;
}

// Gloo matches messages by slot alone, and when a peer sends more bytes than
// the matching receive expects, Gloo's own I/O thread throws and the process
// aborts. So the tag carries a hash of the op's shape (kind, count, dtype,
// root, reduce op) in its high 20 bits and the low 12 bits of the sequence
// number: ranks that disagree on an op never match each other's messages and
// time out with an error naming the op instead. (Collectives run one at a
// time, so 4096 sequence numbers never alias.)
uint32_t TagOf(const sl_op_t& op) {
  uint64_t shape = Mix(Mix(Mix(Mix(op.kind) ^ PerRankCount(op)) ^ op.send.dtype) ^
                       (static_cast<uint64_t>(op.root) << 8 | op.redop));
  return static_cast<uint32_t>(((shape & 0xfffff) << 12) | (op.seq & 0xfff));
}

::gloo::AllreduceOptions::Func ReduceFunction(sl_dtype_t dtype, sl_redop_t redop) {
  return [dtype, redop](void* out, const void* a, const void* b, size_t n) {
    backend::SlReduce3(out, a, b, n, dtype, redop);
  };
}

// The single-rank case needs no transport: copy where the op would.
void RunLocal(const sl_op_t& op) {
  const size_t elem = sl_dtype_size(op.recv.dtype);
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
    case SL_OP_ALLGATHER:
    case SL_OP_REDUCE_SCATTER:
    case SL_OP_ALLTOALL:
    case SL_OP_REDUCE:
      if (op.send.data != nullptr && op.send.data != op.recv.data && op.recv.count > 0) {
        std::memmove(op.recv.data, op.send.data, op.recv.count * elem);
      }
      return;
    default:  // broadcast and barrier are no-ops on one rank
      return;
  }
}

template <typename T>
void Allreduce(const std::shared_ptr<::gloo::Context>& context, void* send, void* recv,
               size_t n, const sl_op_t& op, std::chrono::milliseconds timeout) {
  ::gloo::AllreduceOptions options(context);
  if (send != nullptr && send != recv) {
    options.setInput(static_cast<T*>(send), n);
  }
  options.setOutput(static_cast<T*>(recv), n);
  options.setReduceFunction(ReduceFunction(op.recv.dtype, op.redop));
  options.setTag(TagOf(op));
  options.setTimeout(timeout);
  ::gloo::allreduce(options);
}

template <typename T>
void RunTyped(const std::shared_ptr<::gloo::Context>& context, const sl_op_t& op,
              std::chrono::milliseconds timeout) {
  const int size = context->size;
  const int rank = context->rank;
  const sl_dtype_t dtype = op.recv.dtype;
  switch (op.kind) {
    case SL_OP_ALLREDUCE: {
      const size_t n = op.recv.count;
      Allreduce<T>(context, op.send.data, op.recv.data, n, op, timeout);
      if (op.redop == SL_AVG) SlDivideBy(op.recv.data, n, dtype, size);
      return;
    }
    case SL_OP_REDUCE_SCATTER: {
      // Gloo has no reduce-scatter for arbitrary reduce functions: reduce
      // the whole input into scratch (the send buffer is the caller's and
      // must stay intact), then keep this rank's block.
      const size_t n = op.recv.count;
      std::vector<T> scratch(static_cast<const T*>(op.send.data),
                             static_cast<const T*>(op.send.data) + n * size);
      Allreduce<T>(context, nullptr, scratch.data(), n * size, op, timeout);
      std::memcpy(op.recv.data, scratch.data() + n * rank, n * sizeof(T));
      if (op.redop == SL_AVG) SlDivideBy(op.recv.data, n, dtype, size);
      return;
    }
    case SL_OP_REDUCE: {
      const size_t n = op.send.count;
      // Gloo's ring reduce writes partial results into the output on every
      // rank; non-roots get scratch so their (unused) recv stays untouched.
      std::vector<T> scratch;
      T* out = static_cast<T*>(op.recv.data);
      if (rank != op.root) {
        scratch.resize(n);
        out = scratch.data();
      }
      ::gloo::ReduceOptions options(context);
      if (op.send.data != out) options.setInput(static_cast<T*>(op.send.data), n);
      options.setOutput(out, n);
      options.setRoot(op.root);
      options.setReduceFunction(ReduceFunction(op.send.dtype, op.redop));
      options.setTag(TagOf(op));
      options.setTimeout(timeout);
      ::gloo::reduce(options);
      if (op.redop == SL_AVG && rank == op.root) {
        SlDivideBy(op.recv.data, n, dtype, size);
      }
      return;
    }
    case SL_OP_BROADCAST: {
      ::gloo::BroadcastOptions options(context);
      options.setOutput(static_cast<T*>(op.recv.data), op.recv.count);
      options.setRoot(op.root);
      options.setTag(TagOf(op));
      options.setTimeout(timeout);
      ::gloo::broadcast(options);
      return;
    }
    case SL_OP_ALLGATHER: {
      ::gloo::AllgatherOptions options(context);
      options.setInput(static_cast<T*>(op.send.data), op.send.count);
      options.setOutput(static_cast<T*>(op.recv.data), op.recv.count);
      options.setTag(TagOf(op));
      options.setTimeout(timeout);
      ::gloo::allgather(options);
      return;
    }
    case SL_OP_ALLTOALL: {
      ::gloo::AlltoallOptions options(context);
      options.setInput(static_cast<T*>(op.send.data), op.send.count);
      options.setOutput(static_cast<T*>(op.recv.data), op.recv.count);
      options.setTag(TagOf(op));
      options.setTimeout(timeout);
      ::gloo::alltoall(options);
      return;
    }
    default:
      return;
  }
}

// The buffer that defines the op's dtype and per-rank count. ALLREDUCE
// reads recv because an in-place call may leave send empty.
const sl_buffer_t& DataBuffer(const sl_op_t& op) {
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
    case SL_OP_BROADCAST:
    case SL_OP_RECV:
      return op.recv;
    default:
      return op.send;
  }
}

}  // namespace

sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, std::string* message) {
  static const backend::SlOpRules kRules = {
      "gloo", SL_DEVICE_CPU, -1, "use SYNCLINE_BACKEND=nccl or a map such as cpu:gloo,cuda:nccl"};
  return backend::SlValidateOp(op, rank, size, kRules, message);
}

void RunCollective(const std::shared_ptr<::gloo::Context>& context, const sl_op_t& op,
                   std::chrono::milliseconds timeout) {
  if (op.kind == SL_OP_BARRIER) {
    if (context->size == 1) return;
    ::gloo::BarrierOptions options(context);
    options.setTag(TagOf(op));
    options.setTimeout(timeout);
    ::gloo::barrier(options);
    return;
  }
  const sl_buffer_t& data = DataBuffer(op);
  if (data.count == 0) return;  // every rank sees the same count
  if (context->size == 1) {
    RunLocal(op);
    return;
  }
  switch (sl_dtype_size(data.dtype)) {
    case 1:
      RunTyped<uint8_t>(context, op, timeout);
      return;
    case 2:
      RunTyped<uint16_t>(context, op, timeout);
      return;
    case 4:
      RunTyped<uint32_t>(context, op, timeout);
      return;
    case 8:
      RunTyped<uint64_t>(context, op, timeout);
      return;
    default:
      return;  // ValidateOp rejected it
  }
}

std::unique_ptr<::gloo::transport::UnboundBuffer> StartPointToPoint(
    const std::shared_ptr<::gloo::Context>& context, const sl_op_t& op) {
  const sl_buffer_t& data = op.kind == SL_OP_SEND ? op.send : op.recv;
  const size_t bytes = data.count * sl_dtype_size(data.dtype);
  if (bytes == 0) return nullptr;
  auto buffer = context->createUnboundBuffer(data.data, bytes);
  // The byte count is folded in for the same reason as in TagOf(): a send
  // and a recv of different sizes must not match.
  const uint64_t slot = kP2pSlotBase | ((Mix(bytes) & 0xffffff) << 32) | op.tag;
  if (op.kind == SL_OP_SEND) {
    buffer->send(op.peer, slot);
  } else {
    buffer->recv(op.peer, slot);
  }
  return buffer;
}

}  // namespace syncline::gloo_backend
