// AVX2 INT8 sums (kernels/int8_matmul_impl.h; only called when the CPU has AVX2).
//
// vpmaddubsw (_mm256_maddubs_epi16) multiplies UNSIGNED bytes of its first operand by SIGNED
// bytes of its second and adds adjacent pairs into int16 with saturation. The sign trick makes it
// exact here: a = |x| (as u8) and b = sign(x) * w (_mm256_sign_epi8: w, -w or 0), so a * b = x * w.
// Both codes are in [-127, 127] (the quantisers never produce -128, so -w never overflows and
// |x| fits in u8), hence |a * b| <= 127 * 127 = 16129 and a pair sum is at most 32258 < 32767:
// no saturation ever happens. vpmaddwd with ones then widens the pair sums to int32 (4 products
// per lane per 32 columns) and they are added up exactly in int32 (|total| < 2^31 by
// kInt8MaxCols). Integer addition is associative, so the result equals the scalar reference.
//
// Register blocking (results do not depend on it): one input x 4 rows (GEMV: the input's |x|
// and sign are used by four rows), 4 inputs x 2 rows in batches (a row's 32 codes are loaded once
// for four inputs).
#include <immintrin.h>

#include <algorithm>

#include "kernels/int8_matmul_impl.h"

namespace wick::kernels::int8 {
namespace {

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Rows r .. r + NR - 1 times inputs 0 .. NT - 1; sums[t * ss + k] for row r + k.
template <int NR, int NT>
inline void tile(const Int8Matrix& w, int64_t r, const int8_t* xq, int64_t xs, int32_t* sums,
                 int64_t ss) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* row[NR];
  for (int k = 0; k < NR; ++k) row[k] = w.codes + (r + k) * w.stride;
  // GEMV: prefetch the rows two tiles ahead (the hardware prefetcher alone left the 65536-row
  // head at ~80 % of the bandwidth bf16 reaches; with this it reads at or above it). Rows past
  // the end are not addressed: a row prefetches itself then.
  const int8_t* ahead[NR];
  for (int k = 0; k < NR; ++k)
    ahead[k] = r + k + 2 * NR < w.rows ? row[k] + 2 * NR * w.stride : row[k];
  __m256i acc[NR][NT];
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) acc[k][t] = _mm256_setzero_si256();
  for (int64_t i = 0; i < w.stride; i += 32) {
    if (NT == 1 && (i & 63) == 0)
      for (int k = 0; k < NR; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(ahead[k] + i), _MM_HINT_T0);
    __m256i wv[NR];
    for (int k = 0; k < NR; ++k)
      wv[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[k] + i));
    for (int t = 0; t < NT; ++t) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + t * xs + i));
      const __m256i ax = _mm256_abs_epi8(x);
      for (int k = 0; k < NR; ++k) {
        const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[k], x));
        acc[k][t] = _mm256_add_epi32(acc[k][t], _mm256_madd_epi16(p, ones));
      }
    }
  }
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) sums[t * ss + k] = hsum(acc[k][t]);
}

template <int NT>
void rows_of(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t xs,
             int32_t* sums, int64_t ss) {
  constexpr int kRows = NT == 1 ? 4 : 2;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) tile<kRows, NT>(w, r, xq, xs, sums + (r - r0), ss);
  for (; r < r1; ++r) tile<1, NT>(w, r, xq, xs, sums + (r - r0), ss);
}

void sums_avx2(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t x_stride,
               int64_t nt, int32_t* sums, int64_t s_stride) {
  for (int64_t t = 0; t < nt; t += 4) {
    const int8_t* x = xq + t * x_stride;
    int32_t* s = sums + t * s_stride;
    switch (std::min<int64_t>(4, nt - t)) {
      case 4:
        rows_of<4>(w, r0, r1, x, x_stride, s, s_stride);
        break;
      case 3:
        rows_of<3>(w, r0, r1, x, x_stride, s, s_stride);
        break;
      case 2:
        rows_of<2>(w, r0, r1, x, x_stride, s, s_stride);
        break;
      default:
        rows_of<1>(w, r0, r1, x, x_stride, s, s_stride);
        break;
    }
  }
}

void epilogue_avx2(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s, int64_t s_stride,
                   const InputRow* in, int64_t nt, const float* x, int64_t cols, float* y,
                   int64_t y_stride, const int32_t* cols_buf, int64_t n_cols, float* tile) {
  epilogue_rows(w, r0, r1, s, s_stride, in, nt, x, cols, y, y_stride, cols_buf, n_cols, tile);
}

}  // namespace

const Kernels& kernels_avx2() {
  static const Kernels k{sums_avx2, epilogue_avx2, "avx2"};
  return k;
}

}  // namespace wick::kernels::int8
