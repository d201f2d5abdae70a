#include "backends/nccl/ops.h"

#include "syncline/plugin_sdk/validate.h"

namespace syncline::nccl_backend {

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
  const backend::SlOpRules rules = {
      "nccl", SL_DEVICE_CUDA, device,
      "use SYNCLINE_BACKEND=gloo or ucx for CPU buffers (or a map such as cpu:gloo,cuda:nccl)"};
  const sl_result_t rc = backend::SlValidateOp(op, rank, size, rules, message);
  if (rc != SL_OK) return rc;
  if (op.kind == SL_OP_ALLTOALL && op.send.count > 0 && op.send.data == op.recv.data) {
    // Grouped send/recv read and write every block concurrently.
    *message = backend::SlOpName(op) +
               ": send and recv are the same memory; NCCL's alltoall cannot run in place, "
               "pass a separate recv buffer";
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
