// The scalar fp16 / bf16 conversions (base/fp16.h).
#include "base/fp16.h"

namespace wick::base {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // infinity or NaN (keep a quiet NaN's top payload bits)
    return a == 0x7f800000u ? (sign | 0x7c00u)
                            : static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
  }
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp > 15) return sign | 0x7c00u;  // overflow to infinity
  if (exp >= -14) {                     // a normal half (the rounding carry may reach infinity)
    const uint32_t mant = a & 0x7fffffu;
    uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: rounds to zero
  // Subnormal half: the value in units of 2^-24 is mant24 * 2^(exp + 1).
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = -(exp + 1);  // 14 .. 24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // may carry into the smallest normal
  return static_cast<uint16_t>(sign | h);
}

uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void round_to_bf16(const float* x, float* y, size_t n) {
  // f32_to_bf16 without a branch, so the loop vectorises: the NaN test is a mask.
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const int32_t magnitude = static_cast<int32_t>(u & 0x7fffffffu);
    const uint32_t nan = -static_cast<uint32_t>(magnitude > 0x7f800000);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const uint32_t r = (rounded & ~nan) | (0x7fc00000u & nan);
    std::memcpy(y + i, &r, 4);
  }
}

}  // namespace wick::base
