// torch_interop.cc: tensor <-> BufferView mapping and small blocking
// collectives for the DDP layer.
#include "torch_interop.h"

#if SYNCLINE_DDP_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "syncline/ddp/distributed.h"
#include "syncline/ddp/error.h"

namespace syncline::ddp {

namespace internal {

DataType ToDataType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return DataType::kFloat32;
    case c10::ScalarType::Double:
      return DataType::kFloat64;
    case c10::ScalarType::Half:
      return DataType::kFloat16;
    case c10::ScalarType::BFloat16:
      return DataType::kBFloat16;
    case c10::ScalarType::Char:
      return DataType::kInt8;
    case c10::ScalarType::Byte:
      return DataType::kUInt8;
    case c10::ScalarType::Bool:
      return DataType::kUInt8;
    case c10::ScalarType::Int:
      return DataType::kInt32;
    case c10::ScalarType::Long:
      return DataType::kInt64;
    default:
      throw Error(
          absl::StatusCode::kInvalidArgument,
          absl::StrCat("syncline::ddp: tensors of dtype ", c10::toString(type),
                       " cannot be communicated; supported: f32 f64 f16 bf16 i8 u8 bool "
                       "i32 i64"));
  }
}

BufferView TensorView(const at::Tensor& t) {
  if (!t.is_contiguous()) {
    throw Error(absl::StatusCode::kInternal,
                "syncline::ddp: internal error: a non-contiguous tensor was passed "
                "to a collective");
  }
  BufferView view;
  view.data = t.data_ptr();
  view.count = static_cast<size_t>(t.numel());
  view.dtype = ToDataType(t.scalar_type());
  if (t.is_cuda()) {
    view.device = Device::Cuda(t.device().index());
#if SYNCLINE_DDP_WITH_CUDA
    // Ordered after the work libtorch queued on the current stream; the
    // backend makes its own stream wait on it (plugin_abi.h, sl_buffer_t).
    view.stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#endif
  }
  return view;
}

bool WaitForTensorOp(Work& work, const at::Tensor& t, const std::string& what) {
#if SYNCLINE_DDP_WITH_CUDA
  if (t.is_cuda()) {
    const c10::cuda::CUDAStream stream =
        c10::cuda::getCurrentCUDAStream(t.device().index());
    ThrowIfError(work.WaitStream(stream.stream()), what + " (" + work.Describe() + ")");
    t.record_stream(stream);
    return true;
  }
#else
  (void)t;  // only CUDA tensors are waited on through their stream
#endif
  ThrowIfError(work.Wait(), what + " (" + work.Describe() + ")");
  return false;
}

std::string DescribeTensor(c10::ScalarType type, at::IntArrayRef sizes) {
  const char* name = "?";
  try {
    name = DataTypeName(ToDataType(type));
  } catch (const std::exception&) {
    name = c10::toString(type);
  }
  return absl::StrCat(name, "[", absl::StrJoin(sizes, ", "), "]");
}

void BroadcastTensors(Communicator& comm, const std::vector<at::Tensor>& ts, int root,
                      absl::Duration timeout, const std::string& what) {
  if (comm.size() == 1) return;
  // Post everything first so the transfers pipeline, then wait in order.
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;  // (target, buffer)
  std::vector<std::unique_ptr<Work>> works;
  BroadcastOptions options;
  options.root = root;
  options.timeout = timeout;
  for (const at::Tensor& t : ts) {
    if (t.numel() == 0) continue;
    at::Tensor buffer = t.is_contiguous() ? t : t.contiguous();
    works.push_back(
        ThrowIfError(comm.Broadcast(TensorView(buffer), options),
                     "broadcast of " + what + " from rank " + std::to_string(root)));
    staged.emplace_back(t, buffer);
  }
  for (size_t i = 0; i < works.size(); ++i) {
    ThrowIfError(works[i]->Wait(),
                 "broadcast of " + what + " (" + works[i]->Describe() + ")");
    auto& [target, buffer] = staged[i];
    if (!target.is_same(buffer)) target.copy_(buffer);
  }
}

std::vector<int64_t> AllreduceInt64(Communicator& comm, std::vector<int64_t> values,
                                    ReduceOp op, absl::Duration timeout,
                                    const std::string& what) {
  if (comm.size() == 1 || values.empty()) return values;
  AllreduceOptions options;
  options.op = op;
  options.timeout = timeout;
  auto work = ThrowIfError(comm.Allreduce(View(values), options), what);
  ThrowIfError(work->Wait(), what + " (" + work->Describe() + ")");
  return values;
}

std::vector<std::vector<int64_t>> AllgatherInt64(Communicator& comm,
                                                 const std::vector<int64_t>& v,
                                                 absl::Duration timeout,
                                                 const std::string& what) {
  const int n = comm.size();
  if (n == 1) return {v};
  AllgatherOptions options;
  options.timeout = timeout;
  // Round 1: lengths; round 2: the vectors padded to the longest.
  std::vector<int64_t> length = {static_cast<int64_t>(v.size())};
  std::vector<int64_t> lengths(n);
  auto work = ThrowIfError(comm.Allgather(View(length), View(lengths), options), what);
  ThrowIfError(work->Wait(), what + " (" + work->Describe() + ")");
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest == 0) return std::vector<std::vector<int64_t>>(n);
  std::vector<int64_t> padded(v);
  padded.resize(longest, 0);
  std::vector<int64_t> all(longest * n);
  work = ThrowIfError(comm.Allgather(View(padded), View(all), options), what);
  ThrowIfError(work->Wait(), what + " (" + work->Describe() + ")");
  std::vector<std::vector<int64_t>> out(n);
  for (int r = 0; r < n; ++r) {
    out[r].assign(all.begin() + r * longest, all.begin() + r * longest + lengths[r]);
  }
  return out;
}

std::vector<int64_t> BroadcastInt64(Communicator& comm, std::vector<int64_t> v, int root,
                                    absl::Duration timeout, const std::string& what) {
  if (comm.size() == 1) return v;
  BroadcastOptions options;
  options.root = root;
  options.timeout = timeout;
  std::vector<int64_t> length = {static_cast<int64_t>(v.size())};
  auto work = ThrowIfError(comm.Broadcast(View(length), options), what);
  ThrowIfError(work->Wait(), what + " (" + work->Describe() + ")");
  v.resize(length[0]);
  if (v.empty()) return v;
  work = ThrowIfError(comm.Broadcast(View(v), options), what);
  ThrowIfError(work->Wait(), what + " (" + work->Describe() + ")");
  return v;
}

}  // namespace internal
}  // namespace syncline::ddp
