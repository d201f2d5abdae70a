// Tests of the plugin SDK's kernels: the f16/bf16 conversions against independent
// references (the compiler's _Float16 and exact double arithmetic), and the
// reduction kernels against scalar loops, for every dtype x op.
#include "syncline/plugin_sdk/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "syncline/plugin_sdk/half.h"

namespace syncline::backend {
namespace {

#ifdef __FLT16_MAX__
uint16_t CompilerHalf(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

TEST(Half, EveryHalfRoundTripsAndMatchesTheCompiler) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    _Float16 ref;
    std::memcpy(&ref, &h, sizeof(ref));
    const float f = HalfToFloat(h);
    if (std::isnan(static_cast<float>(ref))) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    ASSERT_EQ(FloatBits(f), FloatBits(static_cast<float>(ref))) << std::hex << bits;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << bits;
  }
}

TEST(Half, RoundsLikeTheCompilerOnRandomFloats) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> any;
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    // Bias toward the f16 range (exponents 2^-26 .. 2^17) so that
    // subnormal, normal, overflow and tie cases are all hit.
    uint32_t bits = any(rng);
    bits = (bits & 0x807fffffu) | ((100u + (bits >> 23) % 46u) << 23);
    if (i % 7 == 0) bits &= 0xffffe000u | (1u << 12);  // exact ties
    const float f = BitsToFloat(bits);
    ASSERT_EQ(FloatToHalf(f), CompilerHalf(f)) << f << " bits " << std::hex << bits;
    ++checked;
  }
  EXPECT_EQ(checked, 2000000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // ties to even -> inf
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
}
#endif  // __FLT16_MAX__

// Nearest-even bf16 of f, computed in double from the two candidates.
uint16_t ReferenceBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dlo = std::fabs(double(BFloat16ToFloat(lo)) - double(f));
  const double dhi = std::fabs(double(BFloat16ToFloat(hi)) - double(f));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(BFloat16, RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = any(rng);
    if ((bits & 0x7f800000u) == 0x7f800000u) continue;      // inf/nan below
    if (i % 5 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // exact ties
    const float f = BitsToFloat(bits);
    if ((FloatBits(f) & 0x7fffffffu) >= 0x7f7f8000u) continue;  // overflow
    ASSERT_EQ(FloatToBFloat16(f), ReferenceBFloat16(f)) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(
      BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
}

template <typename T>
void CheckIntegerKernels(sl_dtype_t dtype) {
  const size_t n = 1037;  // not a multiple of any vector width
  std::vector<T> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(static_cast<int>(i % 23) - (std::is_signed_v<T> ? 11 : 0));
    b[i] = static_cast<T>(static_cast<int>((i * 7) % 19) - (std::is_signed_v<T> ? 9 : 0));
  }
  for (int op = 0; op < SL_REDOP_COUNT; ++op) {
    std::vector<T> out = a;
    SlReduceInto(out.data(), b.data(), n, dtype, static_cast<sl_redop_t>(op));
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = a[i], y = b[i];
      int64_t want = 0;
      switch (op) {
        case SL_SUM:
        case SL_AVG:
          want = x + y;
          break;
        case SL_PROD:
          want = x * y;
          break;
        case SL_MIN:
          want = std::min(x, y);
          break;
        case SL_MAX:
          want = std::max(x, y);
          break;
      }
      ASSERT_EQ(static_cast<int64_t>(out[i]), static_cast<int64_t>(static_cast<T>(want)))
          << SlDtypeName(dtype) << " " << SlRedopName(static_cast<sl_redop_t>(op))
          << " i=" << i;
    }
  }
  // AVG's division truncates toward zero.
  std::vector<T> v = {static_cast<T>(7), static_cast<T>(std::is_signed_v<T> ? -7 : 8)};
  SlDivideBy(v.data(), v.size(), dtype, 2);
  EXPECT_EQ(static_cast<int64_t>(v[0]), 3);
  EXPECT_EQ(static_cast<int64_t>(v[1]), std::is_signed_v<T> ? -3 : 4);
}

TEST(ReduceKernels, Integers) {
  CheckIntegerKernels<int8_t>(SL_I8);
  CheckIntegerKernels<uint8_t>(SL_U8);
  CheckIntegerKernels<int32_t>(SL_I32);
  CheckIntegerKernels<int64_t>(SL_I64);
}

TEST(ReduceKernels, FloatsAndWidenedHalves) {
  const size_t n = 1001;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.25f * static_cast<float>(static_cast<int>(i % 31) - 15);
    b[i] = 0.5f * static_cast<float>(static_cast<int>((i * 5) % 13) - 6);
  }
  for (int op = 0; op < SL_REDOP_COUNT; ++op) {
    const auto redop = static_cast<sl_redop_t>(op);
    std::vector<float> out = a;
    SlReduceInto(out.data(), b.data(), n, SL_F32, redop);
    std::vector<uint16_t> h(n), hb(n), bf(n), bfb(n);
    for (size_t i = 0; i < n; ++i) {
      h[i] = FloatToHalf(a[i]);
      hb[i] = FloatToHalf(b[i]);
      bf[i] = FloatToBFloat16(a[i]);
      bfb[i] = FloatToBFloat16(b[i]);
    }
    SlReduceInto(h.data(), hb.data(), n, SL_F16, redop);
    SlReduceInto(bf.data(), bfb.data(), n, SL_BF16, redop);
    for (size_t i = 0; i < n; ++i) {
      float want = 0;
      switch (op) {
        case SL_SUM:
        case SL_AVG:
          want = a[i] + b[i];
          break;
        case SL_PROD:
          want = a[i] * b[i];
          break;
        case SL_MIN:
          want = std::min(a[i], b[i]);
          break;
        case SL_MAX:
          want = std::max(a[i], b[i]);
          break;
      }
      // The inputs are exact in every format and the results need at most
      // 8 significant bits, so all three must be exact.
      ASSERT_EQ(out[i], want) << SlRedopName(redop) << " i=" << i;
      ASSERT_EQ(HalfToFloat(h[i]), want) << SlRedopName(redop) << " i=" << i;
      ASSERT_EQ(BFloat16ToFloat(bf[i]), want) << SlRedopName(redop) << " i=" << i;
    }
  }
  std::vector<uint16_t> third = {FloatToHalf(1.0f), FloatToBFloat16(1.0f)};
  SlDivideBy(&third[0], 1, SL_F16, 3);
  SlDivideBy(&third[1], 1, SL_BF16, 3);
  EXPECT_EQ(third[0], FloatToHalf(1.0f / 3.0f));
  EXPECT_EQ(third[1], FloatToBFloat16(1.0f / 3.0f));
}

TEST(ReduceKernels, ThreeOperandFormMayAliasEitherInput) {
  std::vector<double> a = {1, 5, -2}, b = {4, 2, 3}, out(3);
  SlReduce3(out.data(), a.data(), b.data(), 3, SL_F64, SL_MAX);
  EXPECT_EQ(out, (std::vector<double>{4, 5, 3}));
  SlReduce3(b.data(), a.data(), b.data(), 3, SL_F64, SL_SUM);
  EXPECT_EQ(b, (std::vector<double>{5, 7, 1}));
}

}  // namespace
}  // namespace syncline::backend
