// AVX-512 WKV-7 head update for head sizes that are a multiple of 16 (64 in released models).
// Sums run in 16-lane accumulators over j, then _mm512_reduce_add_ps - a fixed order, shared by
// the step and the sequence, so the two passes still agree bit for bit.
#include <immintrin.h>

#include <cstdint>

// GCC 12 false positives on the _mm512_undefined_* operands inside its reduction intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels {

void wkv7_head_avx512(int N, float* __restrict S, const float* __restrict r,
                      const float* __restrict w, const float* __restrict k,
                      const float* __restrict v, const float* __restrict kk,
                      const float* __restrict a, float* __restrict y) {
  for (int i = 0; i < N; ++i) {
    float* Si = S + static_cast<int64_t>(i) * N;
    __m512 sa_acc = _mm512_setzero_ps();
    for (int j = 0; j < N; j += 16)
      sa_acc = _mm512_fmadd_ps(_mm512_loadu_ps(Si + j),
                               _mm512_sub_ps(_mm512_setzero_ps(), _mm512_loadu_ps(kk + j)), sa_acc);
    const __m512 sa = _mm512_set1_ps(_mm512_reduce_add_ps(sa_acc));
    const __m512 vi = _mm512_set1_ps(v[i]);
    __m512 y_acc = _mm512_setzero_ps();
    for (int j = 0; j < N; j += 16) {
      const __m512 b = _mm512_mul_ps(_mm512_loadu_ps(kk + j), _mm512_loadu_ps(a + j));
      __m512 s = _mm512_mul_ps(_mm512_loadu_ps(Si + j), _mm512_loadu_ps(w + j));
      s = _mm512_fmadd_ps(sa, b, s);
      s = _mm512_fmadd_ps(vi, _mm512_loadu_ps(k + j), s);
      _mm512_storeu_ps(Si + j, s);
      y_acc = _mm512_fmadd_ps(s, _mm512_loadu_ps(r + j), y_acc);
    }
    y[i] = _mm512_reduce_add_ps(y_acc);
  }
}

}  // namespace wick::kernels
