// torch_interop.h: the seam between libtorch tensors and the core's plain
// value types (private to libsyncline_ddp).
//
// Maps ScalarType to DataType and a contiguous tensor to a BufferView, and
// posts the few blocking collectives DDP needs outside the bucket path
// (parameter/buffer broadcast, small integer allreduces and allgathers).
// Every function throws Error (error.h) with the core's code and message.
// Threading: callers post from one thread at a time (see distributed.h).
#ifndef SYNCLINE_DDP_SRC_TORCH_INTEROP_H_
#define SYNCLINE_DDP_SRC_TORCH_INTEROP_H_

#include <ATen/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "syncline/communicator.h"
#include "syncline/types.h"

namespace syncline::ddp::internal {

// The core's DataType for `type`; bool maps to u8 (same size, only copied).
// Throws for types the core cannot carry (complex, ...).
DataType ToDataType(c10::ScalarType type);

// A view of the whole contiguous tensor `t` (throws if not contiguous).
BufferView TensorView(const at::Tensor& t);

// WaitForTensorOp()
//
// Waits for `work`, an op that reads or writes `t`. For a CUDA tensor (in a
// build against a CUDA libtorch) this is what c10d's work.wait() does on
// NCCL: libtorch's current stream is made to wait for the op on the device
// (Work::WaitStream) and the host goes on; `t` is recorded on that stream,
// so the caching allocator reuses its memory only after the op. Returns
// true then. Otherwise (CPU tensors, CPU-only libtorch) it is Work::Wait()
// on the host and returns false. Throws Error naming `what`
// if the op failed (on CUDA: if it had failed by the time of the call).
bool WaitForTensorOp(Work& work, const at::Tensor& t, const std::string& what);

// Short description for messages: "f32[16, 8]".
std::string DescribeTensor(c10::ScalarType type, at::IntArrayRef sizes);

// Broadcasts every tensor in place from `root`: posts all, then waits all.
// Non-contiguous tensors go through a contiguous copy. `what` names the
// tensors in errors ("parameters", "buffers").
void BroadcastTensors(Communicator& comm, const std::vector<at::Tensor>& ts, int root,
                      absl::Duration timeout, const std::string& what);

// Blocking allreduce of a small int64 vector.
std::vector<int64_t> AllreduceInt64(Communicator& comm, std::vector<int64_t> values,
                                    ReduceOp op, absl::Duration timeout,
                                    const std::string& what);

// Blocking allgather of int64 vectors whose length may differ per rank.
// Returns one vector per rank, each with its own length.
std::vector<std::vector<int64_t>> AllgatherInt64(Communicator& comm,
                                                 const std::vector<int64_t>& v,
                                                 absl::Duration timeout,
                                                 const std::string& what);

// Blocking broadcast from `root` of an int64 vector whose length only the
// root knows; returns the root's vector on every rank.
std::vector<int64_t> BroadcastInt64(Communicator& comm, std::vector<int64_t> v, int root,
                                    absl::Duration timeout, const std::string& what);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_TORCH_INTEROP_H_
