// half.h: IEEE binary16 (f16) and bfloat16 (bf16) conversions to and from f32.
//
// The reduction kernels widen 16-bit floats to f32, reduce, and narrow the
// result back with round-to-nearest-even, so that every backend rounds the
// same way. Written out by hand (no F16C / AVX512-BF16 intrinsics) so that
// the plugin runs on any x86-64 or ARM CPU; the compiler vectorizes the
// branch-light forms below well enough for reduction loops.
//
// Example:
//   uint16_t h = syncline::backend::FloatToHalf(1.5f);   // 0x3e00
//   float f = syncline::backend::HalfToFloat(h);         // 1.5f
#ifndef SYNCLINE_PLUGIN_SDK_HALF_H_
#define SYNCLINE_PLUGIN_SDK_HALF_H_

#include <cstdint>
#include <cstring>

namespace syncline::backend {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// HalfToFloat()
//
// Exact: every f16 value (normal, subnormal, +-0, +-inf, NaN) has an f32.
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) {  // inf or NaN: keep the payload, set the quiet bit
    return BitsToFloat(sign | 0x7f800000u | (mant << 13) |
                       (mant != 0 ? 0x00400000u : 0u));
  }
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return BitsToFloat(sign | FloatBits(magnitude));
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// FloatToHalf()
//
// Round to nearest, ties to even. Overflow gives +-inf, values below the
// smallest subnormal round to +-0, NaN stays NaN.
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u : 0u);
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return sign | 0x7c00u;
  }
  if (abs < 0x38800000u) {  // below 2^-14: the result is subnormal or zero
    // Adding 0.5 (2^-1) aligns the f16 subnormal grid (2^-24) with the last
    // bit of the f32 mantissa, so the FPU does the RNE rounding for us.
    const float shifted = BitsToFloat(abs) + 0.5f;
    return sign | static_cast<uint16_t>(FloatBits(shifted) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits.
  const uint32_t odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xfffu + odd;  // RNE on the dropped bits
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

// BFloat16ToFloat()
//
// Exact: bf16 is the upper half of an f32.
inline float BFloat16ToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

// FloatToBFloat16()
//
// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + odd) >> 16);
}

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_HALF_H_
