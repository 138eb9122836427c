// AVX2 + FMA attention loops: a 64-wide head is 8 vectors of 8 floats.
#include <immintrin.h>

#include "kernels/attention_kernels.h"
#include "kernels/hsum_avx2.h"

namespace wick::kernels {
namespace {

void scores_avx2(const float* q, const float* k, size_t stride, int64_t begin, int64_t end,
                 float scale, float* out) {
  __m256 qv[8];
  for (int i = 0; i < 8; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  for (int64_t p = begin; p < end; ++p) {
    const float* kp = k + p * stride;
    if (p + 4 < end) _mm_prefetch(reinterpret_cast<const char*>(kp + 4 * stride), _MM_HINT_T0);
    __m256 a0 = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kp));
    __m256 a1 = _mm256_mul_ps(qv[1], _mm256_loadu_ps(kp + 8));
    a0 = _mm256_fmadd_ps(qv[2], _mm256_loadu_ps(kp + 16), a0);
    a1 = _mm256_fmadd_ps(qv[3], _mm256_loadu_ps(kp + 24), a1);
    a0 = _mm256_fmadd_ps(qv[4], _mm256_loadu_ps(kp + 32), a0);
    a1 = _mm256_fmadd_ps(qv[5], _mm256_loadu_ps(kp + 40), a1);
    a0 = _mm256_fmadd_ps(qv[6], _mm256_loadu_ps(kp + 48), a0);
    a1 = _mm256_fmadd_ps(qv[7], _mm256_loadu_ps(kp + 56), a1);
    out[p - begin] = hsum(_mm256_add_ps(a0, a1)) * scale;
  }
}

void accumulate_avx2(const float* w, const float* v, size_t stride, int64_t begin, int64_t end,
                     float* acc) {
  __m256 a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(acc + 8 * i);
  for (int64_t p = begin; p < end; ++p) {
    const float* vp = v + p * stride;
    if (p + 4 < end) _mm_prefetch(reinterpret_cast<const char*>(vp + 4 * stride), _MM_HINT_T0);
    const __m256 wp = _mm256_set1_ps(w[p - begin]);
    for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(wp, _mm256_loadu_ps(vp + 8 * i), a[i]);
  }
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(acc + 8 * i, a[i]);
}

}  // namespace

const AttentionKernels& attention_kernels_avx2() {
  static const AttentionKernels k{scores_avx2, accumulate_avx2, "avx2"};
  return k;
}

}  // namespace wick::kernels
