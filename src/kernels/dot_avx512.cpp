// AVX-512F dot products (compiled with -mavx512f ...; only called when the CPU has AVX-512).
#include <immintrin.h>

#include "kernels/dot.h"

namespace wick::kernels {
namespace {

inline __m512 load_bf16(const uint16_t* p) {
  __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
inline __m512 load_bf16_masked(const uint16_t* p, __mmask16 m) {
  __m512i u = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_f16_masked(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// Four 16-lane accumulators over blocks of 64, then 16-wide steps, then a masked tail.
template <typename W, typename Load, typename LoadMasked>
inline float dot_impl(const W* w, const float* x, size_t n, Load load, LoadMasked load_masked) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load(w + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    a1 = _mm512_fmadd_ps(load_masked(w + i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float dot_f32(const float* w, const float* x, size_t n) {
  return dot_impl(
      w, x, n, [](const float* p) { return _mm512_loadu_ps(p); },
      [](const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); });
}
float dot_f16(const uint16_t* w, const float* x, size_t n) {
  return dot_impl(w, x, n, load_f16, load_f16_masked);
}
float dot_bf16(const uint16_t* w, const float* x, size_t n) {
  return dot_impl(w, x, n, load_bf16, load_bf16_masked);
}

}  // namespace

const DotKernels& dot_kernels_avx512() {
  static const DotKernels k{dot_f32, dot_f16, dot_bf16};
  return k;
}

}  // namespace wick::kernels
