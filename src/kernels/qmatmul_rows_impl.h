// The row kernel and driver of the vector quantised kernels (kernels/qmatmul_impl.h Kernels::sb6
// / ::sym), written once for qmatmul_avx2.cpp and qmatmul_avx512.cpp. The tile: per superblock of
// 256 columns, each row's scales (and for sb6 the offset term m · xbsum into accumulator 0), then
// its 8 units of 32 columns decoded once and accumulated for every input of the tile by the
// format's accumulate() (the summation order of one output is the format's, whatever NR and NT);
// at the end reduce(acc[0] + acc[1]). The driver: the inputs in tiles of K::kTile
// (outermost, so a tile's inputs stay in L1 while the item's rows stream past them), one row at
// a time for 2..kTile inputs, and for a single input two rows at once from the two halves of the
// item (their decodes and FMA chains interleave, and two code streams double the memory-level
// parallelism of one sequential stream). The including file supplies K:
//
//   static constexpr int kTile;               inputs decoded per pass over a row
//   using Vec; static constexpr int kParts;   a unit of 32 columns as kParts vectors of floats
//   Vec zero(); Vec load(const float*);
//   Vec affine(__m256 m, const float* xb, Vec acc)   acc + m[0..7] * xb[0..7] (lanes past 8: 0)
//   float reduce(Vec a, Vec b)                 the sum of a + b in the ISA's fixed lane order
//   template <int Bits> using Sb6Fmt, SymFmt;  its code decoders (init, superblock, decode,
//                                              accumulate, kAffine; sb6 also the scales m)
// Each including file gets its own copy (unnamed namespace).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/qmatmul_impl.h"

namespace wick::kernels::qmat {
namespace {

// Rows r + k * rs (k < NR) for NT inputs (px, xbsum already offset to the first input); output
// (row k, input t) goes to y[t * ys + k * rs].
template <class K, class Fmt, int NR, int NT>
void tile(const typename Fmt::Matrix& w, int64_t r, int64_t rs, const float* px, const float* xbsum,
          float* y, int64_t ys) {
  using Vec = typename K::Vec;
  const int64_t cols = w.cols, nsb = cols / 256, ng = cols / kGroup;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  Vec acc[NR][NT][2];
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) acc[k][t][0] = acc[k][t][1] = K::zero();
  for (int64_t j = 0; j < nsb; ++j) {
    for (int k = 0; k < NR; ++k) {
      fmt[k].superblock(j);
      if constexpr (Fmt::kAffine) {
        for (int t = 0; t < NT; ++t)
          acc[k][t][0] = K::affine(fmt[k].m, xbsum + t * ng + 8 * j, acc[k][t][0]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t u = 8 * j + i;
      Vec f[NR][K::kParts];
      for (int k = 0; k < NR; ++k) fmt[k].decode(u, f[k]);
      for (int t = 0; t < NT; ++t) {
        const float* xp = px + t * cols + kGroup * u;
        Vec x[K::kParts];
        for (int q = 0; q < K::kParts; ++q) x[q] = K::load(xp + q * (kGroup / K::kParts));
        for (int k = 0; k < NR; ++k) fmt[k].accumulate(i, f[k], x, acc[k][t]);
      }
    }
  }
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) y[t * ys + k * rs] = K::reduce(acc[k][t][0], acc[k][t][1]);
}

// NT inputs (2 <= NT <= K::kTile) row by row; for n below NT, the next smaller instantiation.
template <class K, class Fmt, int NT>
void rows_for_inputs(int n, const typename Fmt::Matrix& w, int64_t r0, int64_t r1, const float* p,
                     const float* xb, float* o, int64_t ys) {
  if constexpr (NT >= 2) {
    if (n == NT) {
      for (int64_t r = r0; r < r1; ++r) tile<K, Fmt, 1, NT>(w, r, 0, p, xb, o + r, ys);
      return;
    }
    rows_for_inputs<K, Fmt, NT - 1>(n, w, r0, r1, p, xb, o, ys);
  } else {
    // A single input: two rows at a time, from the two halves of the item.
    const int64_t h = (r1 - r0) / 2;
    for (int64_t i = 0; i < h; ++i) tile<K, Fmt, 2, 1>(w, r0 + i, h, p, xb, o + r0 + i, ys);
    if (r0 + 2 * h < r1) tile<K, Fmt, 1, 1>(w, r1 - 1, 0, p, xb, o + r1 - 1, ys);
  }
}

template <class K, class Fmt>
void rows(const typename Fmt::Matrix& w, int64_t r0, int64_t r1, const float* px,
          const float* xbsum, int64_t nt, float* y, int64_t ys) {
  const int64_t cols = w.cols, ng = cols / kGroup;
  for (int64_t t = 0; t < nt; t += K::kTile) {
    const int n = static_cast<int>(std::min<int64_t>(K::kTile, nt - t));
    rows_for_inputs<K, Fmt, K::kTile>(n, w, r0, r1, px + t * cols, xbsum ? xbsum + t * ng : nullptr,
                                      y + t * ys - r0, ys);
  }
}

template <class K>
void sb6_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* px, const float* xbsum,
              int64_t nt, float* y, int64_t ys) {
  switch (w.bits) {
    case 4:
      return rows<K, typename K::template Sb6Fmt<4>>(w, r0, r1, px, xbsum, nt, y, ys);
    case 5:
      return rows<K, typename K::template Sb6Fmt<5>>(w, r0, r1, px, xbsum, nt, y, ys);
    default:
      return rows<K, typename K::template Sb6Fmt<6>>(w, r0, r1, px, xbsum, nt, y, ys);
  }
}

template <class K>
void sym_rows(const SymMatrix& w, int64_t r0, int64_t r1, const float* px, int64_t nt, float* y,
              int64_t ys) {
  if (w.bits == 8)
    return rows<K, typename K::template SymFmt<8>>(w, r0, r1, px, nullptr, nt, y, ys);
  return rows<K, typename K::template SymFmt<6>>(w, r0, r1, px, nullptr, nt, y, ys);
}

}  // namespace
}  // namespace wick::kernels::qmat
