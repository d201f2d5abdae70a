#include "syncline/plugin_sdk/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "syncline/plugin_sdk/half.h"

namespace syncline::backend {
namespace {

// The four element-wise operations as functors, so that each (type, op)
// instantiation is a plain loop the compiler can vectorize. Min and max are
// written as selects rather than std::min/max calls for the same reason.
struct Sum {
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(a + b);
  }
};
struct Prod {
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(a * b);
  }
};
struct Min {
  template <typename T>
  static T Apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <typename T>
  static T Apply(T a, T b) {
    return b > a ? b : a;
  }
};

template <typename T, typename Op>
void Loop(T* out, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
}

// 16-bit floats: widen, reduce in f32, narrow. The block keeps the widened
// values in registers/L1 and lets the inner loops vectorize.
template <typename Op, float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void Loop16(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  constexpr size_t kBlock = 256;
  float fa[kBlock];
  float fb[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) fa[i] = Widen(a[base + i]);
    for (size_t i = 0; i < m; ++i) fb[i] = Widen(b[base + i]);
    for (size_t i = 0; i < m; ++i) fa[i] = Op::Apply(fa[i], fb[i]);
    for (size_t i = 0; i < m; ++i) out[base + i] = Narrow(fa[i]);
  }
}

// Small integers: C++ promotes int8/uint8 to int, so the static_cast in the
// functors wraps the result back (two's complement), matching what a GPU
// backend does on overflow rather than invoking undefined behaviour.
template <typename Op>
void Dispatch(void* out, const void* a, const void* b, size_t n, sl_dtype_t dtype) {
  switch (dtype) {
    case SL_F32:
      Loop<float, Op>(static_cast<float*>(out), static_cast<const float*>(a),
                      static_cast<const float*>(b), n);
      return;
    case SL_F64:
      Loop<double, Op>(static_cast<double*>(out), static_cast<const double*>(a),
                       static_cast<const double*>(b), n);
      return;
    case SL_F16:
      Loop16<Op, HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(out),
                                           static_cast<const uint16_t*>(a),
                                           static_cast<const uint16_t*>(b), n);
      return;
    case SL_BF16:
      Loop16<Op, BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(out),
                                                   static_cast<const uint16_t*>(a),
                                                   static_cast<const uint16_t*>(b), n);
      return;
    case SL_I8:
      Loop<int8_t, Op>(static_cast<int8_t*>(out), static_cast<const int8_t*>(a),
                       static_cast<const int8_t*>(b), n);
      return;
    case SL_U8:
      Loop<uint8_t, Op>(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(a),
                        static_cast<const uint8_t*>(b), n);
      return;
    case SL_I32:
      // Signed overflow is UB in C++; do the arithmetic unsigned and wrap.
      if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
        Loop<uint32_t, Op>(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(a),
                           static_cast<const uint32_t*>(b), n);
      } else {
        Loop<int32_t, Op>(static_cast<int32_t*>(out), static_cast<const int32_t*>(a),
                          static_cast<const int32_t*>(b), n);
      }
      return;
    case SL_I64:
      if constexpr (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>) {
        Loop<uint64_t, Op>(static_cast<uint64_t*>(out), static_cast<const uint64_t*>(a),
                           static_cast<const uint64_t*>(b), n);
      } else {
        Loop<int64_t, Op>(static_cast<int64_t*>(out), static_cast<const int64_t*>(a),
                          static_cast<const int64_t*>(b), n);
      }
      return;
    default:
      return;
  }
}

template <typename T>
void DivideLoop(T* data, size_t n, T divisor) {
  for (size_t i = 0; i < n; ++i) data[i] = data[i] / divisor;
}

// Integers divide in int64 (truncating toward zero, as C++ does), so that a
// divisor larger than the type's range still gives the right answer.
template <typename T>
void DivideIntLoop(T* data, size_t n, int64_t divisor) {
  for (size_t i = 0; i < n; ++i) {
    data[i] = static_cast<T>(static_cast<int64_t>(data[i]) / divisor);
  }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void DivideLoop16(uint16_t* data, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) data[i] = Narrow(Widen(data[i]) / divisor);
}

}  // namespace

void SlReduce3(void* out, const void* a, const void* b, size_t count, sl_dtype_t dtype,
               sl_redop_t op) {
  switch (op) {
    case SL_SUM:
    case SL_AVG:
      Dispatch<Sum>(out, a, b, count, dtype);
      return;
    case SL_PROD:
      Dispatch<Prod>(out, a, b, count, dtype);
      return;
    case SL_MIN:
      Dispatch<Min>(out, a, b, count, dtype);
      return;
    case SL_MAX:
      Dispatch<Max>(out, a, b, count, dtype);
      return;
    default:
      return;
  }
}

void SlReduceInto(void* inout, const void* in, size_t count, sl_dtype_t dtype,
                  sl_redop_t op) {
  SlReduce3(inout, inout, in, count, dtype, op);
}

void SlDivideBy(void* data, size_t count, sl_dtype_t dtype, int divisor) {
  if (divisor <= 1) return;
  switch (dtype) {
    case SL_F32:
      DivideLoop(static_cast<float*>(data), count, static_cast<float>(divisor));
      return;
    case SL_F64:
      DivideLoop(static_cast<double*>(data), count, static_cast<double>(divisor));
      return;
    case SL_F16:
      DivideLoop16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(data), count,
                                             static_cast<float>(divisor));
      return;
    case SL_BF16:
      DivideLoop16<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(data), count,
                                                     static_cast<float>(divisor));
      return;
    case SL_I8:
      DivideIntLoop(static_cast<int8_t*>(data), count, divisor);
      return;
    case SL_U8:
      DivideIntLoop(static_cast<uint8_t*>(data), count, divisor);
      return;
    case SL_I32:
      DivideIntLoop(static_cast<int32_t*>(data), count, divisor);
      return;
    case SL_I64:
      DivideIntLoop(static_cast<int64_t*>(data), count, divisor);
      return;
    default:
      return;
  }
}

const char* SlDtypeName(sl_dtype_t dtype) {
  const char* name = sl_dtype_name(dtype);
  return name != nullptr ? name : "invalid-dtype";
}

const char* SlRedopName(sl_redop_t op) {
  const char* name = sl_redop_name(op);
  return name != nullptr ? name : "invalid-redop";
}

const char* SlOpKindName(sl_op_kind_t kind) {
  const char* name = sl_op_kind_name(kind);
  return name != nullptr ? name : "invalid-op";
}

}  // namespace syncline::backend
