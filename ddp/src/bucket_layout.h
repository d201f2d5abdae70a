// bucket_layout.h: which gradients share a bucket, and in what order the
// buckets launch (private to libsyncline_ddp).
//
// A layout is a list of buckets, each a list of variable indices (the
// reducer's parameters that require grad, in module order). It is a pure
// function of the variables' dtype/device/size and an expected ready order,
// so every rank can compute the initial one alone; the rebuilt one is
// computed on rank 0 and broadcast in the encoded form below.
#ifndef SYNCLINE_DDP_SRC_BUCKET_LAYOUT_H_
#define SYNCLINE_DDP_SRC_BUCKET_LAYOUT_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace syncline::ddp::internal {

struct LayoutVar {
  c10::ScalarType dtype;
  c10::Device device;
  int64_t bytes;
};

using BucketLayout = std::vector<std::vector<size_t>>;

// ComputeBucketLayout()
//
// Walks `order` (every variable exactly once, the order in which gradients
// are expected to become ready) and fills one open bucket per (dtype,
// device). A bucket closes once it holds at least its cap: `first_cap_bytes`
// for the first bucket of each (dtype, device), `cap_bytes` after that. The
// buckets are returned sorted by the position of their first variable in
// `order`, which is the order they launch in.
BucketLayout ComputeBucketLayout(const std::vector<LayoutVar>& vars,
                                 const std::vector<size_t>& order,
                                 int64_t first_cap_bytes, int64_t cap_bytes);

// Completes a partial ready order (e.g. the gradients seen in one backward)
// with the missing variables in reverse index order.
std::vector<size_t> CompleteOrder(const std::vector<size_t>& partial, size_t num_vars);

// Encoded form for a broadcast: [num_buckets, n0, v.., n1, v.., ...].
std::vector<int64_t> EncodeLayout(const BucketLayout& layout);

// Decodes and validates (every variable exactly once, one dtype and device
// per bucket). Throws Error (kInternal) naming what is wrong.
BucketLayout DecodeLayout(const std::vector<int64_t>& encoded,
                          const std::vector<LayoutVar>& vars);

}  // namespace syncline::ddp::internal

#endif  // SYNCLINE_DDP_SRC_BUCKET_LAYOUT_H_
