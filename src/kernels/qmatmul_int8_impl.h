// The loop of the integer-domain sb6 products (kernels/qmatmul.h qmatmul_int8_inputs), written
// once for qmatmul_int8_avx2.cpp and qmatmul_int8_avx512.cpp against their block-sum step Fmt:
// for each superblock j, Fmt gives the 8 exact block sums S_b of a row with the input's codes
// (the one piece that differs per instruction set: vpmaddubsw or vpdpbusd), and this file applies
// the float epilogue of qmatmul.h in 8 lanes, every product and sum rounded on its own (the files
// are compiled with -ffp-contract=off), so both give the scalar reference's bits.
//
// Fmt provides: Sb6RowScales (kernels/qmatmul_row_state.h: init_row, superblock(j) -> s[], m[]);
// init(w, r); a type Input and static Input load(x, j) (superblock j of the input's codes, loaded
// once for all the rows interleaved); __m256i sums(j, const Input&) (S_b of blocks 8j .. 8j+7 in
// lane order); kRows (rows interleaved). Each including file gets its own copy (unnamed namespace).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"

namespace wick::kernels::qmat {
namespace {

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the order of kernels/qmatmul.h.
inline float reduce8(__m256 a) {
  const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

// Rows r, r + rs, ..., r + (NR - 1) rs; output k to y[k * ys].
template <class Fmt, int NR>
inline void int8_rows_n(const Sb6Matrix& w, int64_t r, int64_t rs, const Sb6Int8Input& x, float* y,
                        int64_t ys) {
  const int64_t nsb = w.cols / 256;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  __m256 acc[NR];
  for (int k = 0; k < NR; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    const typename Fmt::Input in = Fmt::load(x, j);
    const __m256 q = _mm256_loadu_ps(x.block_sums + 8 * j);
    const __m256 dx = _mm256_set1_ps(x.scales[j]);
    for (int k = 0; k < NR; ++k) {
      fmt[k].superblock(j);
      const __m256 s = _mm256_cvtepi32_ps(fmt[k].sums(j, in));
      const __m256 t = _mm256_add_ps(_mm256_mul_ps(s, _mm256_load_ps(fmt[k].s)),
                                     _mm256_mul_ps(q, _mm256_load_ps(fmt[k].m)));
      acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(t, dx));
    }
  }
  for (int k = 0; k < NR; ++k) y[k * ys] = reduce8(acc[k]);
}

// y[r - r0] for r in [r0, r1): NR rows at a time from NR equal parts of the range (separate code
// streams, as the fused fp32 GEMV takes them), the rest one by one.
template <class Fmt>
void int8_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input& x, float* y) {
  constexpr int NR = Fmt::kRows;
  const int64_t h = (r1 - r0) / NR;
  for (int64_t i = 0; i < h; ++i) int8_rows_n<Fmt, NR>(w, r0 + i, h, x, y + i, h);
  for (int64_t r = r0 + NR * h; r < r1; ++r) int8_rows_n<Fmt, 1>(w, r, 0, x, y + (r - r0), 0);
}

template <template <int> class Fmt>
void int8_sb6(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input& x, float* y) {
  switch (w.bits) {
    case 4:
      return int8_rows<Fmt<4>>(w, r0, r1, x, y);
    case 5:
      return int8_rows<Fmt<5>>(w, r0, r1, x, y);
    default:
      return int8_rows<Fmt<6>>(w, r0, r1, x, y);
  }
}

}  // namespace
}  // namespace wick::kernels::qmat
