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
// lane order); kRows (rows interleaved).
//
// The GEMM (int8_tile) is written once against a trait Tile (a vector of Tile::kRows int32 / fp32
// lanes, one output row each): the rows' codes are decoded once into a tile whose every 4-column
// group of kRows rows is one vector (codes [block][quad k = 0..7][row][4 bytes], then the scales
// s [block][row] and m [block][row]), and each input's 4 codes are broadcast against it
// (Tile::dot8, two groups of 4 columns: vpdpbusd twice, or vpmaddubsw twice + vpmaddwd), so block
// sums come out one row per lane with no horizontal adds; the epilogue is the same sequence per
// lane, the final tree vertical. A Tile derives its float side (Vec, zero, load, store) from the
// dense kernels' vector trait (kernels/dot_avx512_trait.h, dot_avx2_trait.h) and adds the integer
// side: I, izero, dot8 and cvt (int32 lanes to fp32).
// Each including file gets its own copy (unnamed namespace).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dot_impl.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"
#include "kernels/thread_pool.h"

namespace wick::kernels::qmat {
namespace {

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), the order of kernels/qmatmul.h.
inline float reduce8(__m256 a) {
  const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

// Rows r, r + rs, ..., r + (NR - 1) rs; output k to y[k * ys].
// While they are summed, the codes (and bit planes) of the row kInt8PrefetchRows further on in
// each row's stream are prefetched into L2, one superblock at a time: the hardware prefetcher
// alone follows the many short interleaved streams (codes, planes, scales of NR rows) slowly.
// Prefetching changes no result.
constexpr int64_t kInt8PrefetchRows = 2;

template <class Fmt, int NR>
inline void int8_rows_n(const Sb6Matrix& w, int64_t r, int64_t rs, const Sb6Int8Input& x, float* y,
                        int64_t ys) {
  const int64_t cols = w.cols, nsb = cols / 256;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  // Row r + k rs + kInt8PrefetchRows's codes and planes (null past the matrix, or without planes).
  const char *ahead[NR], *ahead_qh[NR], *ahead_qh2[NR];
  for (int k = 0; k < NR; ++k) {
    const int64_t ra = r + k * rs + kInt8PrefetchRows;
    const bool in = ra < w.rows;
    ahead[k] = in ? reinterpret_cast<const char*>(w.codes_packed + ra * (cols / 2)) : nullptr;
    ahead_qh[k] =
        in && w.bits >= 5 ? reinterpret_cast<const char*>(w.qh + ra * (cols / 8)) : nullptr;
    ahead_qh2[k] =
        in && w.bits >= 6 ? reinterpret_cast<const char*>(w.qh2 + ra * (cols / 8)) : nullptr;
    if (in) _mm_prefetch(reinterpret_cast<const char*>(w.qsqm + ra * nsb * 12), _MM_HINT_T1);
  }
  __m256 acc[NR];
  for (int k = 0; k < NR; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    for (int k = 0; k < NR; ++k) {
      if (ahead[k] == nullptr) continue;
      _mm_prefetch(ahead[k] + 128 * j, _MM_HINT_T1);
      _mm_prefetch(ahead[k] + 128 * j + 64, _MM_HINT_T1);
      if ((j & 1) == 0 && ahead_qh[k] != nullptr) _mm_prefetch(ahead_qh[k] + 32 * j, _MM_HINT_T1);
      if ((j & 1) == 0 && ahead_qh2[k] != nullptr) _mm_prefetch(ahead_qh2[k] + 32 * j, _MM_HINT_T1);
    }
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

// ---- the tile (GEMM) ----

// 0xff in byte i where bit i of w is set.
inline __m256i bits_to_bytes(uint32_t w) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(w)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

// Row r's codes as bytes in column order: per block of 32 columns, the nibble byte e holds
// columns e (low) and e + 16 (high), and bit c of each plane's word column c.
inline void decode_code_bytes(const Sb6Matrix& w, int64_t r, uint8_t* out) {
  const int64_t cols = w.cols;
  const uint8_t* nib = w.codes_packed + r * (cols / 2);
  const uint8_t* qh = w.bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
  const uint8_t* qh2 = w.bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
  const __m128i low = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * b));
    __m256i c = _mm256_setr_m128i(_mm_and_si128(v, low), _mm_and_si128(_mm_srli_epi16(v, 4), low));
    if (qh != nullptr)
      c = _mm256_add_epi8(
          c, _mm256_and_si256(bits_to_bytes(load_u32(qh + 4 * b)), _mm256_set1_epi8(16)));
    if (qh2 != nullptr)
      c = _mm256_add_epi8(
          c, _mm256_and_si256(bits_to_bytes(load_u32(qh2 + 4 * b)), _mm256_set1_epi8(32)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * b), c);
  }
}

// Bytes of the tile of one group of RG rows: codes, then s and m.
template <int RG>
constexpr int64_t tile_group_bytes(int64_t cols) {
  return cols / 32 * RG * (32 + 2 * static_cast<int64_t>(sizeof(float)));
}

// dst[k * RG + rr] = src[rr * stride + k] for k < 8 and rr < RG = Tile::kRows: 8 dwords of each
// of RG rows turned into 8 vectors of one dword per row (an 8 x 8 transpose in each 256-bit half:
// rows rr and rr + 8 share a zmm on AVX-512). The tile's codes (4 bytes per dword) and scales.
template <class Tile>
inline void transpose8(const uint32_t* src, int64_t stride, uint32_t* dst) {
  using I = typename Tile::I;
  constexpr int RG = Tile::kRows;
  I z[8], t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) z[i] = Tile::load_rows(src, stride, i);
    // Per 128-bit lane: t = [a0 b0 a1 b1] / [a2 b2 a3 b3] of row pairs, then u[k] and u[4 + k] hold
    // dword k of four rows in their even lanes and dword k + 4 in their odd lanes.
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = Tile::unpacklo32(z[i], z[i + 1]);
    t[i + 1] = Tile::unpackhi32(z[i], z[i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    u[h] = Tile::unpacklo64(t[h], t[h + 2]);
    u[h + 1] = Tile::unpackhi64(t[h], t[h + 2]);
    u[h + 2] = Tile::unpacklo64(t[h + 1], t[h + 3]);
    u[h + 3] = Tile::unpackhi64(t[h + 1], t[h + 3]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    Tile::store_i(dst + k * RG, Tile::even_lanes(u[k], u[k + 4]));
    Tile::store_i(dst + (k + 4) * RG, Tile::odd_lanes(u[k], u[k + 4]));
  }
}

// Bytes of the scratch pack_group uses: the RG rows' codes as bytes, and their s and m per
// superblock.
template <int RG>
constexpr int64_t pack_scratch_bytes(int64_t cols) {
  return RG * cols + 2 * (cols / 256) * RG * 8 * static_cast<int64_t>(sizeof(float));
}

// The tile of rows [r0, r0 + n), n <= RG (the missing rows get zero codes and scales): each row
// decoded into `scratch` (pack_scratch_bytes), then every block's codes and every superblock's
// scales transposed into the tile.
template <class Tile>
void pack_group(const Sb6Matrix& w, int64_t r0, int64_t n, uint8_t* scratch, uint8_t* tile) {
  constexpr int RG = Tile::kRows;
  const int64_t cols = w.cols, nb = cols / 32, nsb = cols / 256;
  uint8_t* rows = scratch;
  float* rs = reinterpret_cast<float*>(scratch + RG * cols);  // [superblock][row][8]
  float* rm = rs + nsb * RG * 8;
  for (int rr = 0; rr < RG; ++rr) {
    if (rr >= n) {
      std::memset(rows + rr * cols, 0, static_cast<size_t>(cols));
      for (int64_t j = 0; j < nsb; ++j)
        for (int i = 0; i < 8; ++i) rs[(j * RG + rr) * 8 + i] = rm[(j * RG + rr) * 8 + i] = 0.0f;
      continue;
    }
    decode_code_bytes(w, r0 + rr, rows + rr * cols);
    Sb6RowScales sc;
    sc.init_row(w, r0 + rr, w.bits);
    for (int64_t j = 0; j < nsb; ++j) {
      sc.superblock(j);
      std::memcpy(rs + (j * RG + rr) * 8, sc.s, sizeof(sc.s));
      std::memcpy(rm + (j * RG + rr) * 8, sc.m, sizeof(sc.m));
    }
  }
  auto* codes = reinterpret_cast<uint32_t*>(tile);
  auto* s = reinterpret_cast<uint32_t*>(tile + nb * 32 * RG);
  uint32_t* m = s + nb * RG;
  for (int64_t b = 0; b < nb; ++b)
    transpose8<Tile>(reinterpret_cast<const uint32_t*>(rows + 32 * b), cols / 4,
                     codes + b * 8 * RG);
  for (int64_t j = 0; j < nsb; ++j) {
    transpose8<Tile>(reinterpret_cast<const uint32_t*>(rs + j * RG * 8), 8, s + 8 * j * RG);
    transpose8<Tile>(reinterpret_cast<const uint32_t*>(rm + j * RG * 8), 8, m + 8 * j * RG);
  }
}

// out[rr] for the tile's RG rows and one input (codes xc in column order, block sums q, scales
// dx): the epilogue of kernels/qmatmul.h per lane.
template <class Tile>
inline void tile_outputs(const uint8_t* tile, int64_t nb, const int8_t* xc, const float* q,
                         const float* dx, float* out) {
  using F = typename Tile::Vec;
  constexpr int RG = Tile::kRows;
  const float* s = reinterpret_cast<const float*>(tile + nb * 32 * RG);
  const float* m = s + nb * RG;
  const uint8_t* xb = reinterpret_cast<const uint8_t*>(xc);
  F a[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) a[i] = Tile::zero();
  for (int64_t j = 0; j < nb / 8; ++j) {
    // The 8 blocks' sums as 8 independent chains (quad k outer), so the multiply-adds overlap.
    typename Tile::I sum[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) sum[i] = Tile::izero();
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const int64_t b = 8 * j + i;
        const uint8_t* wk = tile + (b * 8 + k) * RG * 4;
        sum[i] = Tile::dot8(sum[i], wk, wk + RG * 4, load_u32(xb + 32 * b + 4 * k),
                            load_u32(xb + 32 * b + 4 * k + 4));
      }
    }
    // Vector operators, never contracted into fused multiply-adds (-ffp-contract=off).
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t b = 8 * j + i;
      const F t = Tile::cvt(sum[i]) * Tile::load(dot_impl::F32{}, s + b * RG) +
                  q[b] * Tile::load(dot_impl::F32{}, m + b * RG);
      a[i] = a[i] + t * dx[j];
    }
  }
  Tile::store(out, ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])));
}

template <class Tile>
void int8_tile(const Sb6Matrix& w, int64_t r0, int64_t r1, const Int8Inputs& x, const float* sums,
               float* y, int64_t ys, Arena& arena) {
  constexpr int RG = Tile::kRows;
  const int64_t cols = w.cols, nb = cols / 32, nsb = cols / 256;
  const int64_t groups = (r1 - r0 + RG - 1) / RG, gb = tile_group_bytes<RG>(cols);
  uint8_t* tile = arena.get<uint8_t>(static_cast<size_t>(groups * gb), Arena::kBlock0);
  uint8_t* scratch =
      arena.get<uint8_t>(static_cast<size_t>(pack_scratch_bytes<RG>(cols)), Arena::kBlock1);
  for (int64_t g = 0; g < groups; ++g)
    pack_group<Tile>(w, r0 + g * RG, std::min<int64_t>(RG, r1 - r0 - g * RG), scratch,
                     tile + g * gb);
  alignas(64) float out[RG];
  for (int64_t t = 0; t < x.T; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      tile_outputs<Tile>(tile + g * gb, nb, x.codes + t * cols, sums + t * nb, x.scales + t * nsb,
                         out);
      const int64_t n = std::min<int64_t>(RG, r1 - r0 - g * RG);
      std::memcpy(y + t * ys + g * RG, out, static_cast<size_t>(n) * sizeof(float));
    }
  }
}

}  // namespace
}  // namespace wick::kernels::qmat
