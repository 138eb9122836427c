// AVX2 + FMA + F16C dot products (only called when the CPU has them).
#include <immintrin.h>

#include "kernels/dot.h"

namespace wick::kernels {
namespace {

inline __m256 load_bf16(const uint16_t* p) {
  __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <typename W, typename Load, typename Scalar>
inline float dot_impl(const W* w, const float* x, size_t n, Load load, Scalar scalar) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(w + i), _mm256_loadu_ps(x + i), a0);
  float tail = 0.f;
  for (; i < n; ++i) tail += scalar(w[i]) * x[i];
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

float dot_f32(const float* w, const float* x, size_t n) {
  return dot_impl(w, x, n, [](const float* p) { return _mm256_loadu_ps(p); },
                  [](float v) { return v; });
}
float dot_f16(const uint16_t* w, const float* x, size_t n) {
  return dot_impl(w, x, n, load_f16, [](uint16_t v) { return f16_to_f32(v); });
}
float dot_bf16(const uint16_t* w, const float* x, size_t n) {
  return dot_impl(w, x, n, load_bf16, [](uint16_t v) { return bf16_to_f32(v); });
}

}  // namespace

const DotKernels& dot_kernels_avx2() {
  static const DotKernels k{dot_f32, dot_f16, dot_bf16};
  return k;
}

}  // namespace wick::kernels
