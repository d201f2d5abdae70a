// comm_hooks.cc: CommFuture, GradBucket and the built-in comm hooks.
#include "syncline/ddp/comm_hooks.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>

#include "syncline/ddp/distributed.h"
#include "syncline/ddp/error.h"
#include "torch_interop.h"

namespace syncline::ddp {

// A future is a chain: a root holding the Work and its value, and links that
// each apply one continuation to their parent's value. Values are computed
// once, on the first Wait().
struct CommFuture::State {
  std::unique_ptr<syncline::Work> work;  // root only; null when ready
  std::shared_ptr<State> parent;         // links only
  std::function<at::Tensor(at::Tensor)> fn;
  at::Tensor value;
  bool resolved = false;
  // The op was waited for in stream order (CUDA): `value` is recorded on
  // the stream that waits for it, so it may go without a host wait.
  bool stream_ordered = false;

  ~State() {
    // The backend may still write into `value`: never free it under the op.
    // The op has its own deadline, so this wait is bounded.
    if (work != nullptr && !stream_ordered && !work->Test()) (void)work->Wait();
  }
};

CommFuture CommFuture::Ready(at::Tensor value) {
  CommFuture f;
  f.state_ = std::make_shared<State>();
  f.state_->value = std::move(value);
  f.state_->resolved = true;
  return f;
}

CommFuture CommFuture::FromWork(std::unique_ptr<syncline::Work> work, at::Tensor value) {
  CommFuture f;
  f.state_ = std::make_shared<State>();
  f.state_->work = std::move(work);
  f.state_->value = std::move(value);
  return f;
}

CommFuture CommFuture::Then(std::function<at::Tensor(at::Tensor)> fn) const {
  if (!valid())
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp: Then() on an invalid CommFuture");
  CommFuture f;
  f.state_ = std::make_shared<State>();
  f.state_->parent = state_;
  f.state_->fn = std::move(fn);
  return f;
}

bool CommFuture::Test() const {
  if (!valid()) return false;
  const State* s = state_.get();
  while (s->parent != nullptr && !s->resolved) s = s->parent.get();
  if (s->resolved) return true;
  return s->work == nullptr || s->work->Test();
}

at::Tensor CommFuture::Wait() const {
  if (!valid())
    throw Error(absl::StatusCode::kFailedPrecondition,
                "syncline::ddp: Wait() on an invalid CommFuture");
  State* s = state_.get();
  if (s->resolved) return s->value;
  if (s->parent != nullptr) {
    CommFuture parent;
    parent.state_ = s->parent;
    s->value = s->fn(parent.Wait());
  } else if (s->work != nullptr) {
    // CUDA buckets: the current stream waits, the host does not (as c10d).
    s->stream_ordered = internal::WaitForTensorOp(*s->work, s->value, "comm hook");
  }
  s->resolved = true;
  return s->value;
}

GradBucket::GradBucket(size_t index, size_t num_buckets, at::Tensor buffer,
                       std::vector<at::Tensor> gradients,
                       std::vector<int64_t> param_indices, int world_size)
    : index_(index),
      num_buckets_(num_buckets),
      buffer_(std::move(buffer)),
      gradients_(std::move(gradients)),
      param_indices_(std::move(param_indices)),
      world_size_(world_size) {}

namespace {

CommFuture AllreduceWith(at::Tensor t, syncline::Communicator& comm, ReduceOp op) {
  if (comm.size() == 1) return CommFuture::Ready(std::move(t));
  AllreduceOptions options;
  options.op = op;
  auto work = ThrowIfError(comm.Allreduce(internal::TensorView(t), options),
                           "allreduce of a gradient bucket");
  return CommFuture::FromWork(std::move(work), std::move(t));
}

}  // namespace

CommFuture AllreduceSum(at::Tensor t, syncline::Communicator& comm) {
  return AllreduceWith(std::move(t), comm, ReduceOp::kSum);
}

CommHook AllreduceHook(const ReductionOptions& reduction) {
  return [reduction](GradBucket& bucket, syncline::Communicator& comm) {
    at::Tensor buffer = bucket.buffer();
    const int world = comm.size();
    const c10::ScalarType grad_type = buffer.scalar_type();
    c10::ScalarType reduce_type = reduction.reduce_dtype.value_or(grad_type);
    if (!reduction.reduce_dtype.has_value() && world > 1 &&
        !comm.SupportsReduce(internal::ToDataType(grad_type), ReduceOp::kSum,
                             internal::TensorView(buffer).device)) {
      // Falling back to f32 is exact for f16/bf16 and never silently wrong.
      reduce_type = c10::ScalarType::Float;
    }
    const bool narrow =
        reduce_type == c10::ScalarType::Half || reduce_type == c10::ScalarType::BFloat16;
    // sqrt(world) splits the division so that neither the summed values
    // nor the pre-divided ones lose much range in a 16-bit sum.
    const double pre = reduction.pre_divide_factor > 0
                           ? reduction.pre_divide_factor
                           : (narrow ? std::sqrt(static_cast<double>(world)) : 1.0);
    const double post = reduction.post_divide ? world / pre : 1.0;
    at::Tensor work_tensor = reduce_type == grad_type ? buffer : buffer.to(reduce_type);
    // A plain mean in the gradients' own type: let the backend average. It
    // divides while it reduces (the UCX ring divides only the block each rank
    // owns, NCCL has ncclAvg), which saves a whole pass over the bucket
    // after the allreduce: the same sum-then-divide, so the same values.
    if (pre == 1.0 && post == world && reduce_type == grad_type && world > 1 &&
        comm.SupportsReduce(internal::ToDataType(grad_type), ReduceOp::kAvg,
                            internal::TensorView(buffer).device)) {
      return AllreduceWith(buffer, comm, ReduceOp::kAvg);
    }
    if (pre != 1.0) work_tensor.div_(pre);
    return AllreduceSum(work_tensor, comm).Then([buffer, post](at::Tensor sum) mutable {
      if (post != 1.0) sum.div_(post);
      if (!sum.is_same(buffer)) buffer.copy_(sum);
      return buffer;
    });
  };
}

namespace {

CommHook CompressHook(c10::ScalarType wire_type) {
  return [wire_type](GradBucket& bucket, syncline::Communicator& comm) {
    at::Tensor buffer = bucket.buffer();
    // Divide before compressing: the sum of N means cannot overflow where the
    // mean itself does not.
    at::Tensor compressed = buffer.scalar_type() == wire_type
                                ? buffer.div_(comm.size())
                                : buffer.div(comm.size()).to(wire_type);
    return AllreduceSum(compressed, comm).Then([buffer](at::Tensor sum) mutable {
      if (!sum.is_same(buffer)) buffer.copy_(sum);
      return buffer;
    });
  };
}

}  // namespace

CommHook Fp16CompressHook() { return CompressHook(c10::ScalarType::Half); }
CommHook Bf16CompressHook() { return CompressHook(c10::ScalarType::BFloat16); }

}  // namespace syncline::ddp
