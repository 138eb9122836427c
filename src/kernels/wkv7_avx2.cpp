// AVX2 WKV-7 head update for head sizes that are a multiple of 8 and at most 256 (64 in released
// models). Each row's two sums (S.(-kk) and S'.r) run in one 8-lane accumulator over j, then a
// fixed horizontal sum - the same order for the step and the sequence, so the two passes still
// agree bit for bit. Two rows per iteration share the loads of w, k, r, -kk and kk*a.
#include <immintrin.h>

#include <cstdint>

#include "kernels/hsum_avx2.h"

namespace wick::kernels {

void wkv7_head_avx2(int N, float* __restrict S, const float* __restrict r,
                    const float* __restrict w, const float* __restrict k, const float* __restrict v,
                    const float* __restrict kk, const float* __restrict a, float* __restrict y) {
  alignas(32) float neg_kk[256], b[256];
  for (int j = 0; j < N; j += 8) {
    const __m256 kkv = _mm256_loadu_ps(kk + j);
    _mm256_store_ps(neg_kk + j, _mm256_sub_ps(_mm256_setzero_ps(), kkv));
    _mm256_store_ps(b + j, _mm256_mul_ps(kkv, _mm256_loadu_ps(a + j)));
  }
  for (int i = 0; i < N; i += 2) {  // N % 8 == 0: rows come in pairs
    float* S0 = S + static_cast<int64_t>(i) * N;
    float* S1 = S0 + N;
    __m256 sa0 = _mm256_setzero_ps(), sa1 = _mm256_setzero_ps();
    for (int j = 0; j < N; j += 8) {
      const __m256 nk = _mm256_load_ps(neg_kk + j);
      sa0 = _mm256_fmadd_ps(_mm256_loadu_ps(S0 + j), nk, sa0);
      sa1 = _mm256_fmadd_ps(_mm256_loadu_ps(S1 + j), nk, sa1);
    }
    const __m256 s0a = _mm256_set1_ps(hsum(sa0)), s1a = _mm256_set1_ps(hsum(sa1));
    const __m256 v0 = _mm256_set1_ps(v[i]), v1 = _mm256_set1_ps(v[i + 1]);
    __m256 y0 = _mm256_setzero_ps(), y1 = _mm256_setzero_ps();
    for (int j = 0; j < N; j += 8) {
      const __m256 wv = _mm256_loadu_ps(w + j), bv = _mm256_load_ps(b + j);
      const __m256 kv = _mm256_loadu_ps(k + j), rv = _mm256_loadu_ps(r + j);
      __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(S0 + j), wv);
      __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(S1 + j), wv);
      s0 = _mm256_fmadd_ps(s0a, bv, s0);
      s1 = _mm256_fmadd_ps(s1a, bv, s1);
      s0 = _mm256_fmadd_ps(v0, kv, s0);
      s1 = _mm256_fmadd_ps(v1, kv, s1);
      _mm256_storeu_ps(S0 + j, s0);
      _mm256_storeu_ps(S1 + j, s1);
      y0 = _mm256_fmadd_ps(s0, rv, y0);
      y1 = _mm256_fmadd_ps(s1, rv, y1);
    }
    y[i] = hsum(y0);
    y[i + 1] = hsum(y1);
  }
}

}  // namespace wick::kernels
