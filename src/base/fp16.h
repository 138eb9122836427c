// IEEE fp16 and bf16 <-> fp32, the one scalar conversion of the base layer: shared by the dense
// kernels (fp16 / bf16 weights), the packed kernels, the checkpoint readers and writers and the
// `.rwkvq` format code (fp16 scales, which are subnormal in the normal case: nothing here ever
// flushes to zero; integer arithmetic only, so the floating-point environment does not matter).
// The vector (F16C / AVX) widenings stay in kernels/; they give the same values.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wick::base {

// Exact widening of an fp16 bit pattern (subnormals, infinities and NaNs kept).
float f16_to_f32(uint16_t h);
// Exact widening of a bf16 bit pattern (the top half of an fp32).
inline float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}
// Rounds to fp16 with round-to-nearest-even, subnormals kept, overflow to infinity.
uint16_t f32_to_f16(float x);
// float32 -> bf16 bits, round to nearest even (overflow to infinity); any NaN becomes the quiet
// NaN 0x7fc0, as torch's float -> bfloat16 conversion gives it.
uint16_t f32_to_bf16(float x);
// y[i] = x[i] rounded to bf16 and widened back to fp32 (exact), i < n. y may equal x.
void round_to_bf16(const float* x, float* y, size_t n);
// half(x) of docs/rwkvq-format.md: rounded to fp16 and widened back.
inline float round_to_half(float x) {
  return f16_to_f32(f32_to_f16(x));
}
// The i-th fp16 of a possibly unaligned byte buffer, widened.
inline float f16_at(const uint8_t* p, int64_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return f16_to_f32(h);
}

}  // namespace wick::base
