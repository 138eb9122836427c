// The horizontal sum of an AVX2 vector in one fixed order ((lo + hi) pairwise, then the two
// halves), shared by every AVX2 kernel whose sums must agree bit for bit across its passes.
// Include only from *_avx2.cpp files (compiled with -mavx2).
#pragma once

#include <immintrin.h>

namespace wick::kernels {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace wick::kernels
