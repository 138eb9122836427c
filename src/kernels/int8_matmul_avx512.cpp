// AVX-512 VNNI INT8 sums (kernels/int8_matmul_impl.h; compiled with -mavx512vnni besides the
// AVX-512 flags, only called when the CPU has AVX-512 F/BW/VL and VNNI - cpu_has_avx512_vnni()).
//
// vpdpbusd (_mm512_dpbusd_epi32) multiplies UNSIGNED bytes of its first operand by SIGNED bytes
// of its second and adds each group of 4 products into an int32 lane, without intermediate
// saturation (it wraps modulo 2^32). The weights are made unsigned by flipping their sign bit,
// u = w XOR 0x80 = w + 128 in [1, 255], and the offset is removed with a second sum:
//   S = sum u * x  -  sum 128 * x        (both computed with vpdpbusd)
// Every step is an addition modulo 2^32, so S is right modulo 2^32; the true sum lies in int32
// (|S| <= cols * 127 * 127 < 2^31 by kInt8MaxCols), so the wrapped result is the exact sum, equal
// to the scalar reference. (Intermediate values may wrap; the end result cannot.)
//
// Register blocking (results do not depend on it): one input x 4 rows (GEMV), 4 inputs x 4 rows
// in batches: 16 accumulators, 4 offset sums, 4 weight vectors and the input in the 32 zmm
// registers.
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

// The 16 int32 lanes added modulo 2^32. The offset trick's partial sums may pass the int32 range
// (only the difference of two of them is exact), so the adds must wrap: the intrinsics' vector
// adds do, whereas _mm512_reduce_add_epi32 adds as int in GCC's header (signed overflow, UB).
inline uint32_t lane_sum_mod32(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  alignas(16) uint32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), q);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

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
  __m512i acc[NR][NT], off[NT];
  for (int t = 0; t < NT; ++t) {
    off[t] = _mm512_setzero_si512();
    for (int k = 0; k < NR; ++k) acc[k][t] = _mm512_setzero_si512();
  }
  for (int64_t i = 0; i < w.stride; i += 64) {
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
  for (int t = 0; t < NT; ++t) {
    const uint32_t o = lane_sum_mod32(off[t]);
    for (int k = 0; k < NR; ++k) {
      const uint32_t a = lane_sum_mod32(acc[k][t]);
      sums[t * ss + k] = static_cast<int32_t>(a - o);
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

void epilogue_avx512_vnni(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s,
                          int64_t s_stride, const InputRow* in, int64_t nt, const float* x,
                          int64_t cols, float* y, int64_t y_stride, const int32_t* cols_buf,
                          int64_t n_cols, float* tile) {
  epilogue_rows(w, r0, r1, s, s_stride, in, nt, x, cols, y, y_stride, cols_buf, n_cols, tile);
}

}  // namespace

const Kernels& kernels_avx512_vnni() {
  static const Kernels k{sums_avx512_vnni, epilogue_avx512_vnni, "avx512-vnni"};
  return k;
}

}  // namespace wick::kernels::int8
