// AVX2 + FMA + F16C dot products (only called when the CPU has them).
#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/hsum_avx2.h"

namespace wick::kernels {
namespace {

inline __m256 load_bf16(const uint16_t* p) {
  __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Row-group kernels. One summation order for every (row, input) pair: one 8-lane accumulator
// over chunks of 8 in order (the partial last chunk zero-padded), then hsum - shared by the
// single dot below, the 8-row GEMV and the 3 x 4 GEMM tile, so their outputs are bit-identical.
struct F32 {
  using W = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(float v) { return v; }
};
struct F16 {
  using W = uint16_t;
  static __m256 load(const uint16_t* p) { return load_f16(p); }
  static float scalar(uint16_t v) { return f16_to_f32(v); }
};
struct BF16 {
  using W = uint16_t;
  static __m256 load(const uint16_t* p) { return load_bf16(p); }
  static float scalar(uint16_t v) { return bf16_to_f32(v); }
};

// The last n % 8 elements as a zero-padded vector.
template <typename E>
inline __m256 load_tail(const typename E::W* p, size_t left) {
  alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < left; ++i) buf[i] = E::scalar(p[i]);
  return _mm256_load_ps(buf);
}

// `next`, when given, is where the rows after these begin: while the NR rows stream, the same
// number of bytes from there is prefetched, one step ahead of the hardware prefetcher, which
// ramps up slowly on many short interleaved row streams (measured: the 65536 x 768 bf16 head
// GEMV read at ~55 % of the bandwidth without it).
template <typename E, int NR>
inline void gemv_rows_n(const typename E::W* w, size_t stride, const float* x, size_t n,
                        float* y, const char* next = nullptr) {
  constexpr size_t kStepBytes = NR * 8 * sizeof(typename E::W);  // weight bytes per step
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (next != nullptr)
      for (size_t b = 0; b < kStepBytes; b += 64)
        _mm_prefetch(next + i * NR * sizeof(typename E::W) + b, _MM_HINT_T0);
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_fmadd_ps(E::load(w + r * stride + i), xv, acc[r]);
  }
  if (i < n) {
    const __m256 xv = load_tail<F32>(x + i, n - i);
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm256_fmadd_ps(load_tail<E>(w + r * stride + i, n - i), xv, acc[r]);
  }
  for (int r = 0; r < NR; ++r) y[r] = hsum(acc[r]);
}

template <typename E>
void gemv_rows(const typename E::W* w, size_t stride, const float* x, size_t n, int nr, float* y) {
  while (nr >= 8) {
    gemv_rows_n<E, 8>(w, stride, x, n, y, reinterpret_cast<const char*>(w + 8 * stride));
    w += 8 * stride, y += 8, nr -= 8;
  }
  switch (nr) {
    case 7: return gemv_rows_n<E, 7>(w, stride, x, n, y);
    case 6: return gemv_rows_n<E, 6>(w, stride, x, n, y);
    case 5: return gemv_rows_n<E, 5>(w, stride, x, n, y);
    case 4: return gemv_rows_n<E, 4>(w, stride, x, n, y);
    case 3: return gemv_rows_n<E, 3>(w, stride, x, n, y);
    case 2: return gemv_rows_n<E, 2>(w, stride, x, n, y);
    case 1: return gemv_rows_n<E, 1>(w, stride, x, n, y);
    default: return;
  }
}

template <int NR, int NT>
inline void gemm_tile_n(const float* w, size_t ws, const float* x, size_t xs, size_t n, float* y,
                        size_t ys) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm256_loadu_ps(w + r * ws + i);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * xs + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < n) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = load_tail<F32>(w + r * ws + i, n - i);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = load_tail<F32>(x + t * xs + i, n - i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * ys + r] = hsum(acc[r][t]);
}

// 16 ymm registers: at most 3 rows x 4 inputs of accumulators (+ 3 weights + 1 input).
template <int NR>
void gemm_tile_rows(const float* w, size_t ws, const float* x, size_t xs, size_t n, int nt,
                    float* y, size_t ys) {
  while (nt >= 4) {
    gemm_tile_n<NR, 4>(w, ws, x, xs, n, y, ys);
    x += 4 * xs, y += 4 * ys, nt -= 4;
  }
  switch (nt) {
    case 3: return gemm_tile_n<NR, 3>(w, ws, x, xs, n, y, ys);
    case 2: return gemm_tile_n<NR, 2>(w, ws, x, xs, n, y, ys);
    case 1: return gemm_tile_n<NR, 1>(w, ws, x, xs, n, y, ys);
    default: return;
  }
}

void gemm_tile(const float* w, size_t ws, const float* x, size_t xs, size_t n, int nr, int nt,
               float* y, size_t ys) {
  while (nr >= 3) {
    gemm_tile_rows<3>(w, ws, x, xs, n, nt, y, ys);
    w += 3 * ws, y += 3, nr -= 3;
  }
  switch (nr) {
    case 2: return gemm_tile_rows<2>(w, ws, x, xs, n, nt, y, ys);
    case 1: return gemm_tile_rows<1>(w, ws, x, xs, n, nt, y, ys);
    default: return;
  }
}

template <typename E>
float dot(const typename E::W* w, const float* x, size_t n) {
  float y;
  gemv_rows_n<E, 1>(w, 0, x, n, &y);
  return y;
}

void widen_f16_avx2(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
void widen_bf16_avx2(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16(src + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace

const DotKernels& dot_kernels_avx2() {
  static const DotKernels k{dot<F32>,       dot<F16>,       dot<BF16>,
                            gemv_rows<F32>, gemv_rows<F16>, gemv_rows<BF16>,
                            gemm_tile,      widen_f16_avx2, widen_bf16_avx2, 3, 4};
  return k;
}

}  // namespace wick::kernels
