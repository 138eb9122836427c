// AVX-512 VNNI INT8 sums (kernels/int8_matmul_impl.h; compiled with -mavx512vnni besides the
// AVX-512 flags, only called when the CPU has AVX-512 F/BW/VL and VNNI - cpu_has_avx512_vnni()).
//
// vpdpbusd (_mm512_dpbusd_epi32) multiplies UNSIGNED bytes of its first operand by SIGNED bytes
// of its second and adds each group of 4 products into an int32 lane, without intermediate
// saturation. The weights are made unsigned by flipping their sign bit, u = w XOR 0x80 = w + 128
// in [1, 255], and the offset is removed lane by lane with a second sum:
//   S = sum u * x  -  sum 128 * x        (both computed with vpdpbusd)
// Within one group (kernels/int8_matmul.h, at most a few hundred columns) every lane stays far
// inside int32 (|u * x| <= 255 * 127 per product), so both sums and their difference are exact
// and equal the scalar reference.
//
// Register blocking (results do not depend on it): one input x 4 rows (GEMV), 4 inputs x 4 rows
// in batches: 16 accumulators, 4 offset sums, 4 weight vectors and the input in the 32 zmm
// registers. At the end of each group the accumulators (less the offset) are reduced four at a
// time (reduce4) and cleared.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/int8_matmul_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own reduction intrinsics as (maybe)
// used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::int8 {
namespace {

// The sums of the 16 int32 lanes of a, b, c and d, in lanes 0, 1, 2, 3.
inline __m128i reduce4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  const __m512i q =
      _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// *dst[n] = the lane sum of v[n], n < N.
template <int N>
inline void store_sums(const __m512i* v, int32_t* const* dst) {
  const __m512i z = _mm512_setzero_si512();
  for (int n = 0; n < N; n += 4) {
    alignas(16) int32_t out[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out),
                    reduce4(v[n], n + 1 < N ? v[n + 1] : z, n + 2 < N ? v[n + 2] : z,
                            n + 3 < N ? v[n + 3] : z));
    for (int j = 0; j < 4 && n + j < N; ++j) *dst[n + j] = out[j];
  }
}

// Rows r .. r + NR - 1 times inputs 0 .. NT - 1, every group; the sum of row r + k, input t,
// group g goes to sums[(t * w.groups + g) * ss + k].
template <int NR, int NT>
inline void tile(const Int8Matrix& w, int64_t r, const int8_t* xq, int64_t xs, int32_t* sums,
                 int64_t ss) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));  // as u8: 128
  const int8_t* row[NR];
  for (int k = 0; k < NR; ++k) row[k] = w.codes + (r + k) * w.stride;
  // GEMV: prefetch the rows two tiles ahead (the hardware prefetcher alone left the 65536-row
  // head at ~80 % of the bandwidth bf16 reaches; with this it reads at or above it). Rows past
  // the end are not addressed: a row prefetches itself then.
  const int8_t* ahead[NR];
  for (int k = 0; k < NR; ++k)
    ahead[k] = r + k + 2 * NR < w.rows ? row[k] + 2 * NR * w.stride : row[k];
  int64_t g = 0;
  for (int64_t i0 = 0; i0 < w.stride; i0 += w.group, ++g) {
    const int64_t i1 = std::min(w.stride, i0 + w.group);
    __m512i acc[NR][NT], off[NT];
    for (int t = 0; t < NT; ++t) {
      off[t] = _mm512_setzero_si512();
      for (int k = 0; k < NR; ++k) acc[k][t] = _mm512_setzero_si512();
    }
    for (int64_t i = i0; i < i1; i += 64) {
      if (NT == 1)
        for (int k = 0; k < NR; ++k)
          _mm_prefetch(reinterpret_cast<const char*>(ahead[k] + i), _MM_HINT_T0);
      __m512i u[NR];
      for (int k = 0; k < NR; ++k) u[k] = _mm512_xor_si512(_mm512_loadu_si512(row[k] + i), bias);
      for (int t = 0; t < NT; ++t) {
        const __m512i x = _mm512_loadu_si512(xq + t * xs + i);
        off[t] = _mm512_dpbusd_epi32(off[t], bias, x);
        for (int k = 0; k < NR; ++k) acc[k][t] = _mm512_dpbusd_epi32(acc[k][t], u[k], x);
      }
    }
    if constexpr (NR == 4 && NT == 1) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + g * ss),
                       reduce4(_mm512_sub_epi32(acc[0][0], off[0]),
                               _mm512_sub_epi32(acc[1][0], off[0]),
                               _mm512_sub_epi32(acc[2][0], off[0]),
                               _mm512_sub_epi32(acc[3][0], off[0])));
    } else {
      __m512i v[NR * NT];
      int32_t* dst[NR * NT];
      for (int t = 0; t < NT; ++t)
        for (int k = 0; k < NR; ++k) {
          v[t * NR + k] = _mm512_sub_epi32(acc[k][t], off[t]);
          dst[t * NR + k] = sums + (t * w.groups + g) * ss + k;
        }
      store_sums<NR * NT>(v, dst);
    }
  }
}

template <int NT>
void rows_of(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t xs,
             int32_t* sums, int64_t ss) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) tile<4, NT>(w, r, xq, xs, sums + (r - r0), ss);
  for (; r < r1; ++r) tile<1, NT>(w, r, xq, xs, sums + (r - r0), ss);
}

void sums_avx512_vnni(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq,
                      int64_t x_stride, int64_t nt, int32_t* sums, int64_t s_stride) {
  for (int64_t t = 0; t < nt; t += 4) {
    const int8_t* x = xq + t * x_stride;
    int32_t* s = sums + t * w.groups * s_stride;
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

void epilogue_avx512(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s,
                     int64_t s_stride, const float* xs, const float* x, float* y) {
  epilogue_rows(w, r0, r1, s, s_stride, xs, x, y);
}

}  // namespace

const Kernels& kernels_avx512_vnni() {
  static const Kernels k{sums_avx512_vnni, epilogue_avx512, "avx512-vnni"};
  return k;
}

}  // namespace wick::kernels::int8
