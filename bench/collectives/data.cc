#include "bench/collectives/data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace syncline::bench {
namespace {

// f16 <-> f32 for the values used here (normal numbers and zero), rounding
// to nearest even like the hardware does.
uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exponent = static_cast<int>((x >> 23) & 0xffu) - 127 + 15;
  const uint32_t mantissa = x & 0x7fffffu;
  if (((x >> 23) & 0xffu) == 0 || exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t h = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits = exponent == 31
                            ? sign | 0x7f800000u | (mantissa << 13)
                            : sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A codec reads and writes element i of a buffer as a double. kTolerance is
// the relative error accepted for floating-point averages.
template <typename T>
struct Plain {
  static double Load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, size_t i, double v) { static_cast<T*>(p)[i] = static_cast<T>(v); }
  static constexpr bool kInteger = std::is_integral_v<T>;
  static constexpr bool kSigned = std::is_signed_v<T>;
  static constexpr double kTolerance = std::is_same_v<T, double> ? 1e-12 : 1e-6;
};
struct Half {
  static double Load(const void* p, size_t i) {
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, size_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  }
  static constexpr bool kInteger = false;
  static constexpr bool kSigned = true;
  static constexpr double kTolerance = 1e-3;
};
struct BHalf {
  static double Load(const void* p, size_t i) {
    return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, size_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToBf16(static_cast<float>(v));
  }
  static constexpr bool kInteger = false;
  static constexpr bool kSigned = true;
  static constexpr double kTolerance = 8e-3;
};

template <typename F>
auto WithCodec(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat64: return f(Plain<double>{});
    case DataType::kFloat16: return f(Half{});
    case DataType::kBFloat16: return f(BHalf{});
    case DataType::kInt8: return f(Plain<int8_t>{});
    case DataType::kUInt8: return f(Plain<uint8_t>{});
    case DataType::kInt32: return f(Plain<int32_t>{});
    case DataType::kInt64: return f(Plain<int64_t>{});
    case DataType::kFloat32: break;
  }
  return f(Plain<float>{});
}

// Rank r's input element i: small integers, so reductions stay exact.
inline double InputValue(int rank, size_t i, bool is_signed) {
  const int v = static_cast<int>((i * 5 + static_cast<size_t>(rank) * 3 + 1) % 8);
  return is_signed ? v - 4 : v;
}

template <typename Codec>
double Reduced(ReduceOp redop, int ranks, size_t i) {
  double acc = InputValue(0, i, Codec::kSigned);
  for (int r = 1; r < ranks; ++r) {
    const double v = InputValue(r, i, Codec::kSigned);
    switch (redop) {
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProd: acc *= v; break;
      default: acc += v; break;
    }
  }
  if (redop == ReduceOp::kAvg) {
    acc = Codec::kInteger ? std::trunc(acc / ranks) : acc / ranks;
  }
  return acc;
}

// Inputs are integers, so every result is exact except a floating-point
// average, which is compared with the dtype's precision.
template <typename Codec>
bool Matches(double got, double want, bool exact) {
  if (Codec::kInteger || exact) return got == want;
  return std::fabs(got - want) <= Codec::kTolerance * std::max(1.0, std::fabs(want));
}

}  // namespace

OpLayout LayoutFor(Op op, DataType dtype, size_t bytes, int ranks) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(std::max(ranks, 1));
  size_t count = std::max<size_t>(bytes / elem, 1);
  OpLayout layout;
  switch (op) {
    case Op::kAllreduce:
    case Op::kReduce:
      layout = {count, count, count, 0};
      break;
    case Op::kBroadcast:
      layout = {0, count, count, 0};
      break;
    case Op::kAllgather: {
      const size_t block = std::max<size_t>(count / n, 1);
      layout = {block, block * n, block * n, 0};
      break;
    }
    case Op::kReduceScatter: {
      const size_t block = std::max<size_t>(count / n, 1);
      layout = {block * n, block, block * n, 0};
      break;
    }
    case Op::kAlltoall: {
      const size_t block = std::max<size_t>(count / n, 1);
      layout = {block * n, block * n, block * n, 0};
      break;
    }
  }
  layout.bytes = layout.count * elem;
  return layout;
}

void FillInput(Op op, DataType dtype, int rank, int ranks, const OpLayout& layout,
               void* data) {
  (void)ranks;
  if (op == Op::kBroadcast && rank != 0) return;
  const size_t n = op == Op::kBroadcast ? layout.recv_count : layout.send_count;
  WithCodec(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    for (size_t i = 0; i < n; ++i) Codec::Store(data, i, InputValue(rank, i, Codec::kSigned));
    return 0;
  });
}

void Scribble(void* data, size_t bytes) { std::memset(data, 0x7f, bytes); }

int64_t CountWrong(Op op, DataType dtype, ReduceOp redop, int rank, int ranks,
                   const OpLayout& layout, const void* recv) {
  const size_t n = static_cast<size_t>(ranks);
  if (op == Op::kReduce && rank != 0) return 0;  // only the root receives
  return WithCodec(dtype, [&](auto codec) -> int64_t {
    using Codec = decltype(codec);
    int64_t wrong = 0;
    const bool exact =
        redop != ReduceOp::kAvg ||
        (op != Op::kAllreduce && op != Op::kReduceScatter && op != Op::kReduce);
    const size_t count = layout.recv_count;
    const size_t block = op == Op::kAllreduce || op == Op::kBroadcast ||
                                 op == Op::kReduce || op == Op::kReduceScatter
                             ? count
                             : count / n;
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      switch (op) {
        case Op::kAllreduce:
        case Op::kReduce:
          want = Reduced<Codec>(redop, ranks, i);
          break;
        case Op::kReduceScatter:
          want = Reduced<Codec>(redop, ranks, static_cast<size_t>(rank) * block + i);
          break;
        case Op::kBroadcast:
          want = InputValue(0, i, Codec::kSigned);
          break;
        case Op::kAllgather:
          want = InputValue(static_cast<int>(i / block), i % block, Codec::kSigned);
          break;
        case Op::kAlltoall:
          want = InputValue(static_cast<int>(i / block),
                            static_cast<size_t>(rank) * block + i % block, Codec::kSigned);
          break;
      }
      if (!Matches<Codec>(Codec::Load(recv, i), want, exact)) ++wrong;
    }
    return wrong;
  });
}

}  // namespace syncline::bench
