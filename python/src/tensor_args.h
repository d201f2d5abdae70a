// tensor_args.h: from PyTorch's tensors and c10d options to Syncline's views.
//
// Every argument check of the syncline process group lives here, so that
// each unsupported case raises one error that names it (the dtype, the
// reduction, a sparse or CUDA tensor) before anything is posted: Syncline
// never runs an op it would get wrong.
//
// Errors are thrown as c10::Error (TORCH_CHECK), which Python sees as
// RuntimeError. Thread safety: stateless functions.
#ifndef SYNCLINE_PYTHON_TENSOR_ARGS_H_
#define SYNCLINE_PYTHON_TENSOR_ARGS_H_

#include <chrono>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "absl/time/time.h"
#include "syncline/types.h"

namespace syncline::torch_backend {

// The Syncline element type of `dtype`. Bool travels as u8 (see ReduceOpFor).
// Throws, naming the dtype and listing the supported ones, for any other.
DataType DataTypeFor(at::ScalarType dtype, const char* op_name);

// The Syncline reduction for `op` on tensors of `dtype`: SUM/AVG/PRODUCT/
// MIN/MAX. On bool, SUM is logical or (MAX) and PRODUCT logical and (MIN),
// as in PyTorch's gloo. Throws naming BAND/BOR/BXOR, PREMUL_SUM, or AVG on
// bool.
ReduceOp ReduceOpFor(const c10d::ReduceOp& op, at::ScalarType dtype,
                     const char* op_name);

// Checks that `t` is a dense CPU tensor Syncline can move; throws naming
// what is not (sparse, CUDA, ...). Contiguity is not required: callers
// stage non-contiguous tensors (Staged below).
void CheckTensor(const at::Tensor& t, const char* op_name);

// Checks that `tensors` holds exactly one tensor (PyTorch passes one per
// device; the CPU backend takes one) and returns it.
const at::Tensor& SingleTensor(const std::vector<at::Tensor>& tensors,
                               const char* op_name);

// Checks that every tensor in `tensors` has the dtype and element count of
// `like`; throws naming the op and the first mismatch.
void CheckSameShape(const std::vector<at::Tensor>& tensors,
                    const at::Tensor& like, const char* op_name);

// Checks the per-rank list argument of allgather, gather, scatter and
// reduce_scatter and returns it: where `held`, exactly one list of `size`
// tensors with the dtype and element count of `like`; elsewhere (the
// non-root ranks of gather and scatter) no tensors at all.
std::vector<at::Tensor> RankBlocks(const std::vector<std::vector<at::Tensor>>& lists,
                                   const at::Tensor& like, int size, bool held,
                                   const char* op_name);

// Checks the flat arguments of _allgather_base and _reduce_scatter_base:
// `whole` (named `whole_name`) holds `size` blocks of `block`'s dtype and
// element count.
void CheckFlatBlocks(const at::Tensor& whole, const at::Tensor& block, int size,
                     const char* whole_name, const char* op_name);

// A view of a contiguous tensor's elements as one flat buffer.
BufferView ViewOf(const at::Tensor& contiguous);

// An op timeout from c10d's options: unset (negative) or zero means "the
// communicator's default" (Syncline's zero).
absl::Duration TimeoutFrom(std::chrono::milliseconds timeout);

}  // namespace syncline::torch_backend

#endif  // SYNCLINE_PYTHON_TENSOR_ARGS_H_
