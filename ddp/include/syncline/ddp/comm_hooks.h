// comm_hooks.h: how a gradient bucket is reduced across ranks.
//
// DistributedDataParallel packs gradients into flat buckets. When a bucket is
// full, the reducer hands it to a communication hook, which starts the
// reduction and returns a CommFuture at once. At the end of backward the
// reducer waits on every bucket's future, in bucket order, and writes the
// future's value (the averaged gradients of the bucket, flat) back into the
// parameters' `.grad`.
//
// Built-in hooks:
//   AllreduceHook(reduction)  the default: sum across ranks, divided so the
//                             result is the mean; AMP-aware (see
//                             ReductionOptions in distributed.h).
//   Fp16CompressHook()        divide by the world size, cast to f16, sum in
//                             f16, cast back into the bucket (for f32 models).
//   Bf16CompressHook()        the same with bf16.
//
// A custom hook is any callable with the CommHook signature. It must issue the
// same collectives in the same order on every rank, and its future's value
// must have the bucket buffer's dtype and element count.
//
// Threading: hooks run with the reducer's lock held, on the autograd thread
// that finished the bucket (the thread that called backward() for CPU
// tensors), or in the end-of-backward callback for buckets that never
// filled, or on the training thread of a rank shadowing inside Join(). A
// hook must not call back into DistributedDataParallel.
//
// Example: a custom hook that sums and then scales by 1/world.
//   ddp.RegisterCommHook([](GradBucket& bucket, syncline::Communicator& comm) {
//     return AllreduceSum(bucket.buffer(), comm).Then([&comm](at::Tensor t) {
//       return t.div_(comm.size());
//     });
//   });
#ifndef SYNCLINE_DDP_COMM_HOOKS_H_
#define SYNCLINE_DDP_COMM_HOOKS_H_

#include <ATen/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "syncline/communicator.h"
#include "syncline/work.h"

// The libraries are built with hidden visibility; this header is the API.
#pragma GCC visibility push(default)

namespace syncline::ddp {

struct ReductionOptions;  // distributed.h

// CommFuture
//
// The asynchronous result of a hook: a tensor that is valid once the
// collective(s) behind it completed. Copyable; copies share one state.
// Destroying the last copy of an unfinished future waits for its Work, so the
// buffers the backend writes into are never freed under it.
// Thread safety: use one future from one thread at a time.
class CommFuture {
 public:
  CommFuture() = default;  // invalid until assigned

  // A future that is already complete with `value`.
  static CommFuture Ready(at::Tensor value);

  // Completes when `work` completes; its value is then `value` (typically the
  // buffer the collective wrote into, kept alive by the future).
  static CommFuture FromWork(std::unique_ptr<syncline::Work> work, at::Tensor value);

  // Then()
  //
  // Returns a future whose value is fn(this future's value). `fn` runs on the
  // thread that calls Wait(), after the Work has completed.
  CommFuture Then(std::function<at::Tensor(at::Tensor)> fn) const;

  // Non-blocking: true once the Work has completed (successfully or not).
  bool Test() const;

  // Waits until done, runs pending continuations once and returns the value.
  // For CPU tensors it blocks the host. For CUDA tensors it makes libtorch's
  // current stream wait for the collective and returns without blocking the
  // host (Work::WaitStream, as c10d's work.wait() on NCCL); continuations
  // then queue their kernels behind it. Throws Error carrying
  // the core's message (op, sequence number, ranks) if the collective
  // failed; on CUDA, a failure after the stream wait was queued surfaces at
  // the next collective (the backend breaks the communicator).
  at::Tensor Wait() const;

  bool valid() const { return state_ != nullptr; }

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// GradBucket
//
// What a hook sees: one bucket's flat gradient buffer and its layout.
// `buffer()` is contiguous, of the gradients' dtype and device; a hook may
// modify it in place. It is only valid during the call of the hook and, when
// the hook returns a future over it, until that future completes.
class GradBucket {
 public:
  GradBucket(size_t index, size_t num_buckets, at::Tensor buffer,
             std::vector<at::Tensor> gradients, std::vector<int64_t> param_indices,
             int world_size);

  size_t index() const { return index_; }
  // True for the bucket launched last in an iteration.
  bool is_last() const { return index_ + 1 == num_buckets_; }
  at::Tensor& buffer() { return buffer_; }
  // Views into buffer(), shaped like the parameters, in bucket order.
  const std::vector<at::Tensor>& gradients() const { return gradients_; }
  // Indices into the module's parameter list (named_parameters() order).
  const std::vector<int64_t>& param_indices() const { return param_indices_; }
  int world_size() const { return world_size_; }

 private:
  size_t index_;
  size_t num_buckets_;
  at::Tensor buffer_;
  std::vector<at::Tensor> gradients_;
  std::vector<int64_t> param_indices_;
  int world_size_;
};

// CommHook
//
// Starts the reduction of `bucket` over `comm` and returns its future. The
// future's value must hold the final (averaged) gradients for the bucket.
using CommHook =
    std::function<CommFuture(GradBucket& bucket, syncline::Communicator& comm)>;

// AllreduceSum()
//
// Building block for hooks: starts an in-place sum allreduce of the
// contiguous tensor `t` and returns a future whose value is `t`.
// Throws Error if the op could not be posted.
CommFuture AllreduceSum(at::Tensor t, syncline::Communicator& comm);

// AllreduceHook()
//
// The default hook: the mean of the bucket across ranks, following
// `reduction` (reduce dtype, pre-divide factor, post-divide).
CommHook AllreduceHook(const ReductionOptions& reduction);

// Fp16CompressHook() / Bf16CompressHook()
//
// Compression for f32/f64 models: divide by the world size, cast to f16
// (bf16), sum in that dtype, and copy the result back into the bucket. Halves
// the bytes on the wire; costs precision (f16 also range: keep gradients
// below 65504 * world / world).
CommHook Fp16CompressHook();
CommHook Bf16CompressHook();

}  // namespace syncline::ddp

#pragma GCC visibility pop

#endif  // SYNCLINE_DDP_COMM_HOOKS_H_
