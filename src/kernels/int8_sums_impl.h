// The INT8 integer sums (kernels/int8_matmul_impl.h Kernels::sums), written once: the register
// blocking, the GEMV prefetch and the input batching below, instantiated by
// int8_matmul_avx2.cpp and int8_matmul_avx512.cpp with a trait V that supplies only the
// instruction-set pieces:
//
//   using Acc, W, In;                    accumulator, loaded weight codes, loaded input codes
//   static constexpr int kBytes;         codes per step (the vector width in bytes)
//   static constexpr int kGemvRows;      rows per tile for one input (GEMV)
//   static constexpr int kBatchRows;     rows per tile for 2..4 inputs
//   static constexpr bool kOffset;       whether a per-input offset sum is subtracted (VNNI)
//   Acc zero(); W load_w(const int8_t*); In load_x(const int8_t*);
//   Acc dot(Acc acc, W w, const In& x);  acc + the products of 4-byte groups, in int32 lanes
//   Acc offset(Acc off, const In& x);    the offset sum's step (kOffset only; it depends on the
//                                        input alone, so it runs once per input, not per tile)
//   uint32_t lane_sum(Acc acc);          the int32 lanes added modulo 2^32
//   __m128i lane_sums4(Acc a, b, c, d);  lane_sum of a, b, c and d in int32 lanes 0 .. 3 (one
//                                        shuffle-and-add tree for 4-row tiles, not four)
//
// Every kernel's sums are exact integer sums (each file says why its products cannot saturate),
// so the blocking never changes a result. Each including file gets its own copy (unnamed
// namespace).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/int8_matmul_impl.h"

namespace wick::kernels::int8 {
namespace {

// Rows r .. r + NR - 1 times inputs 0 .. NT - 1; sums[t * ss + k] for row r + k, less the
// input's offset sum off[t] (kOffset; subtracted modulo 2^32, as every step adds).
template <class V, int NR, int NT>
inline void tile(const Int8Matrix& w, int64_t r, const int8_t* xq, int64_t xs, const uint32_t* off,
                 int32_t* sums, int64_t ss) {
  const int8_t* row[NR];
  for (int k = 0; k < NR; ++k) row[k] = w.codes + (r + k) * w.stride;
  // GEMV: prefetch the rows two tiles ahead, one cache line per 64 codes (the hardware prefetcher
  // alone left the 65536-row head at ~80 % of the bandwidth bf16 reaches; with this it reads at
  // or above it). Rows past the end are not addressed: a row prefetches itself then. Into L2
  // (T1): on a Zen 4 a 0.1B --quantize int8 decode step went from 10.8-11.4 to 7.4-7.8 ms
  // against T0 (2 threads, three alternating rounds).
  const int8_t* ahead[NR];
  for (int k = 0; k < NR; ++k)
    ahead[k] = r + k + 2 * NR < w.rows ? row[k] + 2 * NR * w.stride : row[k];
  typename V::Acc acc[NR][NT];
  for (int t = 0; t < NT; ++t)
    for (int k = 0; k < NR; ++k) acc[k][t] = V::zero();
  int64_t i = 0;
  do {  // w.stride >= kInt8ColumnAlign, a multiple of kBytes
    if (NT == 1 && (i & 63) == 0)
      for (int k = 0; k < NR; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(ahead[k] + i), _MM_HINT_T1);
    typename V::W wv[NR];
    for (int k = 0; k < NR; ++k) wv[k] = V::load_w(row[k] + i);
    for (int t = 0; t < NT; ++t) {
      const typename V::In x = V::load_x(xq + t * xs + i);
      for (int k = 0; k < NR; ++k) acc[k][t] = V::dot(acc[k][t], wv[k], x);
    }
    i += V::kBytes;
  } while (i < w.stride);
  for (int t = 0; t < NT; ++t) {
    if constexpr (NR == 4) {
      const __m128i s4 = V::lane_sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + t * ss),
                       _mm_sub_epi32(s4, _mm_set1_epi32(static_cast<int32_t>(off[t]))));
    } else {
      for (int k = 0; k < NR; ++k)
        sums[t * ss + k] = static_cast<int32_t>(V::lane_sum(acc[k][t]) - off[t]);
    }
  }
}

template <class V, int NT>
void rows_of(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t xs,
             const uint32_t* off, int32_t* sums, int64_t ss) {
  constexpr int kRows = NT == 1 ? V::kGemvRows : V::kBatchRows;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) tile<V, kRows, NT>(w, r, xq, xs, off, sums + (r - r0), ss);
  for (; r < r1; ++r) tile<V, 1, NT>(w, r, xq, xs, off, sums + (r - r0), ss);
}

// The offset sum of the input row x (w.stride codes): 0 without kOffset. Computed once per input
// and work item rather than in every tile (it used 4 of the VNNI 4 x 4 tile's 20 dot products
// per step and 4 of its registers).
template <class V>
uint32_t offset_of(const int8_t* x, int64_t stride) {
  if constexpr (!V::kOffset) {
    return 0u;
  } else {
    typename V::Acc off = V::zero();
    for (int64_t i = 0; i < stride; i += V::kBytes) off = V::offset(off, V::load_x(x + i));
    return V::lane_sum(off);
  }
}

template <class V>
void sums_of(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t x_stride,
             int64_t nt, int32_t* sums, int64_t s_stride) {
  for (int64_t t = 0; t < nt; t += 4) {
    const int8_t* x = xq + t * x_stride;
    int32_t* s = sums + t * s_stride;
    const int64_t n = std::min<int64_t>(4, nt - t);
    uint32_t off[4];
    for (int64_t k = 0; k < n; ++k) off[k] = offset_of<V>(x + k * x_stride, w.stride);
    switch (n) {
      case 4:
        rows_of<V, 4>(w, r0, r1, x, x_stride, off, s, s_stride);
        break;
      case 3:
        rows_of<V, 3>(w, r0, r1, x, x_stride, off, s, s_stride);
        break;
      case 2:
        rows_of<V, 2>(w, r0, r1, x, x_stride, off, s, s_stride);
        break;
      default:
        rows_of<V, 1>(w, r0, r1, x, x_stride, off, s, s_stride);
        break;
    }
  }
}

// epilogue_rows() compiled in the including file (its instruction set).
void epilogue_here(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s, int64_t s_stride,
                   const InputRow* in, int64_t nt, const float* x, int64_t cols, float* y,
                   int64_t y_stride, const int32_t* cols_buf, int64_t n_cols, float* tile) {
  epilogue_rows(w, r0, r1, s, s_stride, in, nt, x, cols, y, y_stride, cols_buf, n_cols, tile);
}

}  // namespace
}  // namespace wick::kernels::int8
