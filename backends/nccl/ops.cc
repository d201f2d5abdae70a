#include "backends/nccl/ops.h"

#include <cstdarg>
#include <cstdio>

#include "syncline/plugin_sdk/reduce.h"

namespace syncline::nccl_backend {
namespace {

using backend::SlDtypeName;
using backend::SlIsValidDtype;
using backend::SlIsValidRedop;

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof(text), format, args);
  va_end(args);
  return text;
}

// Checks one buffer the op reads or writes.
sl_result_t CheckBuffer(const sl_buffer_t& b, const char* which, int device,
                        std::string* message) {
  if (b.count == 0) return SL_OK;
  if (!SlIsValidDtype(b.dtype)) {
    *message =
        Printf("%s buffer has an invalid dtype %d", which, static_cast<int>(b.dtype));
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (b.data == nullptr) {
    *message = Printf("%s buffer has %zu elements but a null pointer", which, b.count);
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (b.device != SL_DEVICE_CUDA) {
    *message = Printf(
        "%s buffer is in host memory, but the nccl backend moves CUDA buffers "
        "only; use SYNCLINE_BACKEND=gloo or ucx for CPU buffers (or a map such "
        "as cpu:gloo,cuda:nccl)",
        which);
    return SL_ERR_UNSUPPORTED;
  }
  if (b.device_index != device) {
    *message = Printf(
        "%s buffer is on cuda:%d, but this communicator was created for "
        "cuda:%d; NCCL moves data of one device per communicator",
        which, b.device_index, device);
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

}  // namespace

uint32_t SupportedDtypeMask() { return (1u << SL_DTYPE_COUNT) - 1; }

ncclDataType_t ToNcclType(sl_dtype_t dtype) {
  switch (dtype) {
    case SL_F32:
      return ncclFloat32;
    case SL_F64:
      return ncclFloat64;
    case SL_F16:
      return ncclFloat16;
    case SL_BF16:
      return ncclBfloat16;
    case SL_I8:
      return ncclInt8;
    case SL_U8:
      return ncclUint8;
    case SL_I32:
      return ncclInt32;
    case SL_I64:
      return ncclInt64;
    default:
      return ncclNumTypes;  // rejected by ValidateOp first
  }
}

// Note the order differs: NCCL numbers max before min.
ncclRedOp_t ToNcclOp(sl_redop_t op) {
  switch (op) {
    case SL_SUM:
      return ncclSum;
    case SL_PROD:
      return ncclProd;
    case SL_MIN:
      return ncclMin;
    case SL_MAX:
      return ncclMax;
    case SL_AVG:
      return ncclAvg;
    default:
      return ncclNumOps;  // rejected by ValidateOp first
  }
}

const sl_buffer_t& DataBuffer(const sl_op_t& op) {
  return (op.kind == SL_OP_RECV || op.kind == SL_OP_BROADCAST) ? op.recv : op.send;
}

sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, int device,
                       std::string* message) {
  if (static_cast<int>(op.kind) < 0 || op.kind >= SL_OP_KIND_COUNT) {
    *message = Printf("post: invalid op kind %d", static_cast<int>(op.kind));
    return SL_ERR_INVALID_ARGUMENT;
  }
  const char* name = backend::SlOpKindName(op.kind);
  const size_t n = op.send.count;
  const size_t m = op.recv.count;
  const size_t p = static_cast<size_t>(size);
  bool shape_ok = true;
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
      shape_ok = n == m;
      break;
    case SL_OP_REDUCE:
      shape_ok = rank != op.root || n == m;
      break;
    case SL_OP_ALLGATHER:
      shape_ok = m == n * p;
      break;
    case SL_OP_REDUCE_SCATTER:
      shape_ok = n == m * p;
      break;
    case SL_OP_ALLTOALL:
      shape_ok = n == m && n % p == 0;
      break;
    default:
      break;
  }
  if (!shape_ok) {
    *message = Printf(
        "%s #%llu: send has %zu elements and recv %zu, which does not fit "
        "the op on %d ranks",
        name, static_cast<unsigned long long>(op.seq), n, m, size);
    return SL_ERR_INVALID_ARGUMENT;
  }
  const bool uses_send =
      op.kind != SL_OP_BARRIER && op.kind != SL_OP_RECV && op.kind != SL_OP_BROADCAST;
  const bool uses_recv = op.kind != SL_OP_BARRIER && op.kind != SL_OP_SEND &&
                         (op.kind != SL_OP_REDUCE || rank == op.root);
  std::string why;
  sl_result_t rc = uses_send ? CheckBuffer(op.send, "the send", device, &why) : SL_OK;
  if (rc == SL_OK && uses_recv) rc = CheckBuffer(op.recv, "the recv", device, &why);
  if (rc != SL_OK) {
    *message = Printf("%s #%llu: %s", name, static_cast<unsigned long long>(op.seq),
                      why.c_str());
    return rc;
  }
  const bool reduces = op.kind == SL_OP_ALLREDUCE || op.kind == SL_OP_REDUCE ||
                       op.kind == SL_OP_REDUCE_SCATTER;
  if (reduces && !SlIsValidRedop(op.redop)) {
    *message =
        Printf("%s #%llu: invalid reduce op %d", name,
               static_cast<unsigned long long>(op.seq), static_cast<int>(op.redop));
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_BROADCAST || op.kind == SL_OP_REDUCE) &&
      (op.root < 0 || op.root >= size)) {
    *message = Printf("%s #%llu: root %d is not a rank of 0..%d", name,
                      static_cast<unsigned long long>(op.seq), op.root, size - 1);
    return SL_ERR_INVALID_ARGUMENT;
  }
  if ((op.kind == SL_OP_SEND || op.kind == SL_OP_RECV) &&
      (op.peer < 0 || op.peer >= size || op.peer == rank)) {
    *message = Printf("%s #%llu: peer %d must be another rank of 0..%d", name,
                      static_cast<unsigned long long>(op.seq), op.peer, size - 1);
    return SL_ERR_INVALID_ARGUMENT;
  }
  if (op.kind == SL_OP_ALLTOALL && n > 0 && op.send.data == op.recv.data) {
    // Grouped send/recv read and write every block concurrently.
    *message = Printf(
        "alltoall #%llu: send and recv are the same memory; NCCL's "
        "alltoall cannot run in place, pass a separate recv buffer",
        static_cast<unsigned long long>(op.seq));
    return SL_ERR_INVALID_ARGUMENT;
  }
  return SL_OK;
}

ncclResult_t EnqueueOp(ncclComm_t comm, const sl_op_t& op, int rank, int size,
                       cudaStream_t stream, void* scratch) {
  const sl_buffer_t& data = DataBuffer(op);
  if (op.kind != SL_OP_BARRIER && data.count == 0) return ncclSuccess;
  const ncclDataType_t type = ToNcclType(data.dtype);
  switch (op.kind) {
    case SL_OP_ALLREDUCE:
      return ncclAllReduce(op.send.data, op.recv.data, data.count, type,
                           ToNcclOp(op.redop), comm, stream);
    case SL_OP_BROADCAST:
      return ncclBroadcast(op.recv.data, op.recv.data, data.count, type, op.root, comm,
                           stream);
    case SL_OP_REDUCE: {
      // recv is used on the root only; elsewhere NCCL ignores the pointer.
      void* recv = rank == op.root ? op.recv.data : op.send.data;
      return ncclReduce(op.send.data, recv, data.count, type, ToNcclOp(op.redop), op.root,
                        comm, stream);
    }
    case SL_OP_ALLGATHER:
      return ncclAllGather(op.send.data, op.recv.data, data.count, type, comm, stream);
    case SL_OP_REDUCE_SCATTER:
      return ncclReduceScatter(op.send.data, op.recv.data, op.recv.count, type,
                               ToNcclOp(op.redop), comm, stream);
    case SL_OP_ALLTOALL: {
      const size_t block = data.count / static_cast<size_t>(size);
      const size_t bytes = block * sl_dtype_size(data.dtype);
      ncclResult_t rc = ncclGroupStart();
      if (rc != ncclSuccess) return rc;
      for (int peer = 0; peer < size && rc == ncclSuccess; ++peer) {
        const size_t offset = bytes * static_cast<size_t>(peer);
        rc = ncclSend(static_cast<const char*>(op.send.data) + offset, block, type, peer,
                      comm, stream);
        if (rc == ncclSuccess) {
          rc = ncclRecv(static_cast<char*>(op.recv.data) + offset, block, type, peer,
                        comm, stream);
        }
      }
      // The group must be closed even after a failed call inside it.
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    }
    case SL_OP_BARRIER:
      // Every rank's one-float allreduce completes only when all arrived.
      return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm, stream);
    case SL_OP_SEND:
      return ncclSend(op.send.data, data.count, type, op.peer, comm, stream);
    case SL_OP_RECV:
      return ncclRecv(op.recv.data, data.count, type, op.peer, comm, stream);
    default:
      return ncclInvalidArgument;
  }
}

}  // namespace syncline::nccl_backend
