// The sampler's scalar numerics, one definition for the vector loops (kernels/sampler_loops.h)
// and the sampler itself (sampling/sampler.cpp), so that every path agrees bit for bit.
#pragma once

#include <bit>
#include <cstdint>

namespace wick::kernels {

// Bins of the sampler's lazy order (sampling/sampler.cpp); the last takes everything beyond it.
inline constexpr int kSamplerBins = 1024;

// e^x for x in [-100, 0] (callers clamp: -inf and NaN become -100), f32, branch-free so that
// loops over it vectorise. Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial for
// e^r, times 2^n built from the exponent bits; 2^n is 0 for n <= -127 (x below about -87.7), so
// the clamped values give exactly 0. Relative error < 1e-7 against exp(); monotone (checked over
// every float in [-100, 0]). Every operation rounds on its own: the files that use it are compiled
// with -ffp-contract=off (no fused multiply-add), whatever the instruction set.
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
  return y * std::bit_cast<float>(biased << 23);
}

// An id's probability from its e = exp(z - max) and 1 / sum(e).
inline float prob_of(float e, double inv_sum) {
  return static_cast<float>(static_cast<double>(e) * inv_sum);
}

}  // namespace wick::kernels
