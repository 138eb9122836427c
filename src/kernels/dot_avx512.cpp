// AVX-512F kernels (compiled with -mavx512f ...; only called when the CPU has AVX-512).
//
// One summation order everywhere: each (weight row, input) pair accumulates its products in one
// 16-lane fp32 accumulator, 16 elements at a time in order (the last, partial chunk masked), and
// the 16 lanes are then added by _mm512_reduce_add_ps (a fixed tree). The single dot, the
// multi-row GEMV and the GEMM tile all follow it, so every output is bit-identical whichever
// kernel computed it. Independent chains come from several rows (GEMV: 8) or rows x inputs (GEMM
// tile: 4 x 6), which hides the FMA latency.
#include <immintrin.h>

#include "kernels/dot.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own conversion and reduction
// intrinsics as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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
inline __m512 load_f32(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_f32_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

struct F32 {
  using W = float;
  static __m512 load(const float* p) { return load_f32(p); }
  static __m512 load_masked(const float* p, __mmask16 m) { return load_f32_masked(p, m); }
};
struct F16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p) { return load_f16(p); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return load_f16_masked(p, m); }
};
struct BF16 {
  using W = uint16_t;
  static __m512 load(const uint16_t* p) { return load_bf16(p); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return load_bf16_masked(p, m); }
};

inline __mmask16 tail_mask(size_t left) { return static_cast<__mmask16>((1u << left) - 1u); }

// NR rows of W (row stride `stride` elements) . x, n elements each.
template <typename E, int NR>
inline void gemv_rows_n(const typename E::W* w, size_t stride, const float* x, size_t n,
                        float* y) {
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    for (int r = 0; r < NR; ++r) acc[r] = _mm512_fmadd_ps(E::load(w + r * stride + i), xv, acc[r]);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
    for (int r = 0; r < NR; ++r)
      acc[r] = _mm512_fmadd_ps(E::load_masked(w + r * stride + i, m), xv, acc[r]);
  }
  for (int r = 0; r < NR; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

template <typename E>
void gemv_rows(const typename E::W* w, size_t stride, const float* x, size_t n, int nr, float* y) {
  while (nr >= 8) {
    gemv_rows_n<E, 8>(w, stride, x, n, y);
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

// NR fp32 weight rows x NT inputs: y[t * y_stride + r] = w_r . x_t.
template <int NR, int NT>
inline void gemm_tile_n(const float* w, size_t w_stride, const float* x, size_t x_stride,
                        size_t n, float* y, size_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_ps(w + r * w_stride + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * x_stride + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * w_stride + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * x_stride + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int NR>
void gemm_tile_rows(const float* w, size_t ws, const float* x, size_t xs, size_t n, int nt,
                    float* y, size_t ys) {
  switch (nt) {
    case 6: return gemm_tile_n<NR, 6>(w, ws, x, xs, n, y, ys);
    case 5: return gemm_tile_n<NR, 5>(w, ws, x, xs, n, y, ys);
    case 4: return gemm_tile_n<NR, 4>(w, ws, x, xs, n, y, ys);
    case 3: return gemm_tile_n<NR, 3>(w, ws, x, xs, n, y, ys);
    case 2: return gemm_tile_n<NR, 2>(w, ws, x, xs, n, y, ys);
    case 1: return gemm_tile_n<NR, 1>(w, ws, x, xs, n, y, ys);
    default: return;
  }
}

void gemm_tile(const float* w, size_t ws, const float* x, size_t xs, size_t n, int nr, int nt,
               float* y, size_t ys) {
  switch (nr) {
    case 4: return gemm_tile_rows<4>(w, ws, x, xs, n, nt, y, ys);
    case 3: return gemm_tile_rows<3>(w, ws, x, xs, n, nt, y, ys);
    case 2: return gemm_tile_rows<2>(w, ws, x, xs, n, nt, y, ys);
    case 1: return gemm_tile_rows<1>(w, ws, x, xs, n, nt, y, ys);
    default: return;
  }
}

template <typename E>
void widen(const typename E::W* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, E::load(src + i));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, E::load_masked(src + i, m));
  }
}

template <typename E>
float dot(const typename E::W* w, const float* x, size_t n) {
  float y;
  gemv_rows_n<E, 1>(w, 0, x, n, &y);
  return y;
}

}  // namespace

const DotKernels& dot_kernels_avx512() {
  static const DotKernels k{dot<F32>,        dot<F16>,          dot<BF16>,
                            gemv_rows<F32>,  gemv_rows<F16>,    gemv_rows<BF16>,
                            gemm_tile,       widen<F16>,        widen<BF16>,       4, 6};
  return k;
}

}  // namespace wick::kernels
