// Branch-free exponential and logistic functions for loops that the compiler vectorises: the
// sampler's passes over all ids (kernels/sampler_math.h) and the time mix's gates
// (kernels/gate_loops.h). One definition, so every loop that uses them agrees bit for bit. Every
// operation rounds on its own: the files that use them are compiled with -ffp-contract=off (no
// fused multiply-add), whatever the instruction set. The functions have internal linkage (an
// unnamed namespace): each file compiled for its own instruction set keeps its own copy, so the
// linker can never hand a baseline caller one compiled for AVX-512.
#pragma once

#include <bit>
#include <cstdint>

namespace wick::kernels {
namespace {

// e^x for x in [-100, 0] (callers clamp: -inf and NaN become -100), f32, branch-free so that
// loops over it vectorise. Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial for
// e^r, times 2^n built from the exponent bits; 2^n is 0 for n <= -127 (x below about -87.7), so
// the clamped values give exactly 0. NaN gives NaN (the exponent bits are shifted unsigned, so no
// input overflows a signed shift). Relative error < 1e-7 against exp(); monotone (checked over
// every float in [-100, 0]).
inline float exp_clamped(float x) {
  const float t =
      x * 1.44269504088896341f + 12582912.0f;  // 1.5 * 2^23: t - 1.5 * 2^23 = round(x log2 e)
  const float n = t - 12582912.0f;
  const int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;  // the same n as an integer
  float r = x - n * 0.693359375f;  // ln 2 split in two (Cody-Waite) keeps r exact enough
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r2 + r + 1.0f;
  int32_t biased = ni + 127;
  biased = biased > 0 ? biased : 0;  // 2^n below the normal range -> 0
  return y * std::bit_cast<float>(static_cast<uint32_t>(biased) << 23);
}

// 1 / (1 + e^-x) for any float x, from e = e^-|x| (exp_clamped; below -100 it is 0 in f32
// anyway): 1 / (1 + e) for x >= 0, e / (1 + e) below, so neither side overflows. Within 3 units
// in the last place of the double-precision logistic where that is a normal float
// (tests/kernels: GateLoops.SigmoidMatchesTheDoubleLogistic); +inf gives 1, -inf 0, NaN NaN.
inline float sigmoid(float x) {
  float m = x < 0.f ? x : -x;  // -|x| (NaN stays NaN)
  m = m < -100.f ? -100.f : m;
  const float e = exp_clamped(m);
  const float inv = 1.f / (1.f + e);
  return x < 0.f ? e * inv : inv;
}

}  // namespace
}  // namespace wick::kernels
