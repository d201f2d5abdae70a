// reduce.h: element-wise reduction kernels for every dtype and reduce op of
// the plugin ABI.
//
// Backends that move data themselves (Gloo with a custom reduce function,
// UCX) call these to combine a received chunk into a local one. They know no
// transport. 16-bit floats are widened to f32, reduced, and rounded back to
// nearest-even, so f16/bf16 results match what a GPU backend computing in
// f32 would give. AVG is not a kernel of its own: reduce with SUM, then call
// SlDivideBy() once on the final result (integers truncate toward zero).
//
// Thread safety: all functions are pure and may run on any thread.
//
// Example:
//   float acc[3] = {1, 2, 3}, in[3] = {10, 20, 30};
//   SlReduceInto(acc, in, 3, SL_F32, SL_SUM);   // acc = {11, 22, 33}
//   SlDivideBy(acc, 3, SL_F32, 2);              // acc = {5.5, 11, 16.5}
#ifndef SYNCLINE_PLUGIN_SDK_REDUCE_H_
#define SYNCLINE_PLUGIN_SDK_REDUCE_H_

#include <cstddef>
#include <string>

#include "syncline/plugin_abi.h"
#include "syncline/plugin_sdk/op_format.h"  // SlDescribeOp, for the backends

namespace syncline::backend {

// SlReduceInto()
//
// inout[i] = inout[i] (op) in[i] for i < count. AVG behaves as SUM. `inout`
// and `in` may be the same pointer but must not otherwise overlap. An
// invalid dtype or op is a programming error (callers validate first) and
// leaves `inout` unchanged.
void SlReduceInto(void* inout, const void* in, size_t count, sl_dtype_t dtype,
                  sl_redop_t op);

// SlReduce3()
//
// out[i] = a[i] (op) b[i]: the three-pointer form Gloo's reduce functions
// use. `out` may alias `a` or `b`.
void SlReduce3(void* out, const void* a, const void* b, size_t count, sl_dtype_t dtype,
               sl_redop_t op);

// SlDivideBy()
//
// data[i] /= divisor, finishing an AVG. Integers truncate toward zero;
// 16-bit floats divide in f32 and round to nearest-even. divisor must be > 0.
void SlDivideBy(void* data, size_t count, sl_dtype_t dtype, int divisor);

// SlIsValidDtype() / SlIsValidRedop()
//
// Range checks for values that came across the C ABI.
inline bool SlIsValidDtype(sl_dtype_t dtype) {
  return static_cast<int>(dtype) >= 0 && dtype < SL_DTYPE_COUNT;
}
inline bool SlIsValidRedop(sl_redop_t op) {
  return static_cast<int>(op) >= 0 && op < SL_REDOP_COUNT;
}

// Short names used in messages: "f32", "bf16", "sum", "allreduce".
const char* SlDtypeName(sl_dtype_t dtype);
const char* SlRedopName(sl_redop_t op);
const char* SlOpKindName(sl_op_kind_t kind);

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_REDUCE_H_
