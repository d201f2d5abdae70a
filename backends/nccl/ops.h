// ops.h: mapping the ABI's ops, dtypes and reductions onto NCCL calls.
//
// ValidateOp() re-checks what the core already validated plus what only
// NCCL cares about (CUDA buffers on this communicator's device, no in-place
// alltoall), so that a bad op fails with a message instead of reaching
// NCCL. EnqueueOp() issues the op's NCCL call(s) on `stream`; it does not
// wait for anything.
//
// Thread safety: stateless. EnqueueOp must be called by the one thread that
// currently issues NCCL calls on `comm` (the communicator serializes it).
#ifndef SYNCLINE_BACKENDS_NCCL_OPS_H_
#define SYNCLINE_BACKENDS_NCCL_OPS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "syncline/plugin_abi.h"

namespace syncline::nccl_backend {

// Capability masks (plugin_abi.h layout) of what this backend can do:
// every op, the eight ABI dtypes (NCCL has all of them, bf16 included),
// every reduction on every dtype (AVG is ncclAvg), CUDA buffers only.
uint32_t SupportedDtypeMask();

ncclDataType_t ToNcclType(sl_dtype_t dtype);
ncclRedOp_t ToNcclOp(sl_redop_t op);

// The buffer that defines an op's element count and caller stream: recv for
// RECV and BROADCAST, send otherwise (unused for BARRIER).
const sl_buffer_t& DataBuffer(const sl_op_t& op);

// ValidateOp()
//
// The plugin SDK's SlValidateOp (validate.h) with NCCL's rules (CUDA
// buffers of the communicator's device), then what only NCCL refuses (an
// alltoall in place). SL_OK, or the code with a reason in `message` (without
// the "nccl " prefix).
sl_result_t ValidateOp(const sl_op_t& op, int rank, int size, int device,
                       std::string* message);

// EnqueueOp()
//
// Issues `op` on `stream`. `scratch` is a one-float device buffer used by
// BARRIER. Returns NCCL's result (ncclInProgress is possible on a
// non-blocking communicator). An op with no elements issues nothing.
ncclResult_t EnqueueOp(ncclComm_t comm, const sl_op_t& op, int rank, int size,
                       cudaStream_t stream, void* scratch);

}  // namespace syncline::nccl_backend

#endif  // SYNCLINE_BACKENDS_NCCL_OPS_H_
