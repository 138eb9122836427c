// The loops of the integer-domain sb6 and sym products (kernels/qmatmul.h qmatmul_int8_inputs),
// written once for qmatmul_int8_avx2.cpp and qmatmul_int8_avx512.cpp against their block-sum step
// Fmt: for each superblock j, Fmt gives the 8 exact block sums S_b of a row (sb6: blocks of 32
// columns) with the input's codes
// (the one piece that differs per instruction set: vpmaddubsw or vpdpbusd), and this file applies
// the float epilogue of qmatmul.h in 8 lanes, every product and sum rounded on its own (the files
// are compiled with -ffp-contract=off), so both give the scalar reference's bits.
//
// Fmt provides: Sb6RowScales (kernels/qmatmul_row_state.h: init_row, superblock(j) -> s[], m[]);
// init(w, r); a type Input and static Input load(x, j) (superblock j of the input's codes, loaded
// once for all the rows interleaved); a type Codes and Codes decode(j) (the row's codes of
// superblock j, decoded once for all the inputs); static __m256i sums(const Codes&, const Input&)
// (S_b of blocks 8j .. 8j+7 in lane order); kRows (rows interleaved); kHighBits (it reads the
// high bits from Sb6Matrix::hb, not from the planes).
//
// The GEMM (int8_tile) is written once against a trait Tile (a vector of Tile::kRows int32 / fp32
// lanes, one output row each): the rows' codes are decoded once into a tile whose every 4-column
// group of kRows rows is one vector (codes [block][quad k = 0..7][row][4 bytes], then the scales
// s [block][row] and m [block][row]), and each input's 4 codes are broadcast against it
// (Tile::dot8, two groups of 4 columns: vpdpbusd twice, or vpmaddubsw twice + vpmaddwd), so block
// sums come out one row per lane with no horizontal adds; the epilogue is the same sequence per
// lane, the final tree vertical. A Tile derives its float side (Vec, zero, load, store) from the
// dense kernels' vector trait (kernels/dot_avx512_trait.h, dot_avx2_trait.h) and adds the integer
// side: I, izero, dot8 and cvt (int32 lanes to fp32), and for the sym tile sym_bias (added to the
// signed codes stored in it), sym_dot8 and sym_unbias (int8_sym_tile below).
//
// The sym GEMV (int8_sym) is written once against a policy Dot: sums4 (vpmaddubsw + vpmaddwd, or
// vpdpbusd), kSymRows rows interleaved for every ISA; sym@8 codes meet the input with the sign
// trick, sym@6 codes are summed unsigned in registers against the input in the sym@6 order. Each
// including file gets its own copy (unnamed namespace).
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

// The streams of NR interleaved rows, each kInt8PrefetchRows rows further on, prefetched into L2
// one superblock at a time while the rows are summed: the hardware prefetcher alone follows the
// many short interleaved streams (codes, planes, scales of NR rows) slowly. Prefetching changes no
// result.
constexpr int64_t kInt8PrefetchRows = 2;

template <int NR>
struct RowPrefetch {
  static constexpr int kStreams = 4;
  const char* p[NR][kStreams] = {};  // stream s of row k's row ahead (null: none, or past the end)
  int64_t per[kStreams] = {};        // bytes per superblock of stream s

  // Stream s of row k ahead starts at `start`, `bytes` per superblock.
  void set(int k, int s, const void* start, int64_t bytes) {
    p[k][s] = static_cast<const char*>(start);
    per[s] = bytes;
  }
  // The lines of superblock j of every stream (those of fewer than 64 bytes each time: a row's
  // start need not be on a line).
  void issue(int64_t j) const {
    for (int k = 0; k < NR; ++k)
      for (int s = 0; s < kStreams; ++s) {
        if (p[k][s] == nullptr) continue;
        for (int64_t off = 0; off < per[s]; off += 64)
          _mm_prefetch(p[k][s] + per[s] * j + off, _MM_HINT_T1);
      }
  }
};

// Rows r, r + rs, ..., r + (NR - 1) rs; output k to y[k * ys]. The rows' codes, their high bits
// (Sb6Matrix::hb where Fmt::kHighBits, else the planes) and scales are prefetched (RowPrefetch).
template <class Fmt, int NR, int NI>
inline void int8_rows_n(const Sb6Matrix& w, int64_t r, int64_t rs, const Sb6Int8Input* x, float* y,
                        int64_t ys, int64_t yi) {
  const int64_t cols = w.cols, nsb = cols / 256;
  Fmt fmt[NR];
  RowPrefetch<NR> ahead;
  for (int k = 0; k < NR; ++k) {
    fmt[k].init(w, r + k * rs);
    const int64_t ra = r + k * rs + kInt8PrefetchRows;
    if (ra >= w.rows) continue;
    ahead.set(k, 0, w.codes_packed + ra * (cols / 2), 128);
    ahead.set(k, 1, w.sm + ra * nsb * 16, 32);
    if constexpr (Fmt::kHighBits) {
      if (w.bits >= 5) ahead.set(k, 2, w.hb + ra * nsb * 32 * (w.bits - 4), 32 * (w.bits - 4));
    } else {
      if (w.bits >= 5) ahead.set(k, 2, w.qh + ra * (cols / 8), 32);
      if (w.bits >= 6) ahead.set(k, 3, w.qh2 + ra * (cols / 8), 32);
    }
  }
  __m256 acc[NI][NR];
  for (int u = 0; u < NI; ++u)
    for (int k = 0; k < NR; ++k) acc[u][k] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    ahead.issue(j);
    typename Fmt::Input in[NI];
    __m256 q[NI], dx[NI];
    for (int u = 0; u < NI; ++u) {
      in[u] = Fmt::load(x[u], j);
      q[u] = _mm256_loadu_ps(x[u].block_sums + 8 * j);
      dx[u] = _mm256_set1_ps(x[u].scales[j]);
    }
    for (int k = 0; k < NR; ++k) {
      fmt[k].superblock(j);
      // Each row's codes are decoded once for the NI inputs.
      const typename Fmt::Codes c = fmt[k].decode(j);
      const __m256 sv = _mm256_load_ps(fmt[k].s), mv = _mm256_load_ps(fmt[k].m);
      for (int u = 0; u < NI; ++u) {
        const __m256 s = _mm256_cvtepi32_ps(Fmt::sums(c, in[u]));
        const __m256 t = _mm256_add_ps(_mm256_mul_ps(s, sv), _mm256_mul_ps(q[u], mv));
        acc[u][k] = _mm256_add_ps(acc[u][k], _mm256_mul_ps(t, dx[u]));
      }
    }
  }
  for (int u = 0; u < NI; ++u)
    for (int k = 0; k < NR; ++k) y[u * yi + k * ys] = reduce8(acc[u][k]);
}

// y[r - r0] for r in [r0, r1): NR rows at a time from NR equal parts of the range (separate code
// streams, as the fused fp32 GEMV takes them), the rest one by one. rows_n(r, rs, y, ys, tag)
// computes rows r, r + rs, ... into y[0], y[ys], ..., NR of them, or 1 when tag is Rows<1>.
template <int N>
struct Rows {
  static constexpr int kRows = N;
};
template <int NR, class RowsN>
void interleaved_rows(int64_t r0, int64_t r1, float* y, RowsN&& rows_n) {
  const int64_t h = (r1 - r0) / NR;
  for (int64_t i = 0; i < h; ++i) rows_n(r0 + i, h, y + i, h, Rows<NR>{});
  for (int64_t r = r0 + NR * h; r < r1; ++r) rows_n(r, 0, y + (r - r0), 0, Rows<1>{});
}

template <class Fmt, int NI>
void int8_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input* x, float* y,
               int64_t yi) {
  interleaved_rows<Fmt::kRows>(r0, r1, y,
                               [&](int64_t r, int64_t rs, float* yr, int64_t ys, auto n) {
                                 int8_rows_n<Fmt, decltype(n)::kRows, NI>(w, r, rs, x, yr, ys, yi);
                               });
}

// n = 1 or 2 inputs (Int8InputKernels::sb6): two share each row's decoded codes.
template <class Fmt>
void int8_rows_inputs(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input* x, int n,
                      float* y, int64_t yi) {
  if (n == 2) return int8_rows<Fmt, 2>(w, r0, r1, x, y, yi);
  int8_rows<Fmt, 1>(w, r0, r1, x, y, yi);
}

template <template <int> class Fmt>
void int8_sb6(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input* x, int n, float* y,
              int64_t yi) {
  switch (w.bits) {
    case 4:
      return int8_rows_inputs<Fmt<4>>(w, r0, r1, x, n, y, yi);
    case 5:
      return int8_rows_inputs<Fmt<5>>(w, r0, r1, x, n, y, yi);
    default:
      return int8_rows_inputs<Fmt<6>>(w, r0, r1, x, n, y, yi);
  }
}

// ---- the tile (GEMM) ----

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

// out[u][rr] for the tile's RG rows and NT inputs u (codes xc[u] in column order, superblock
// scales dx[u], block terms blocks[u]): the epilogue of kernels/qmatmul.h per lane, written once
// for the sb6 and sym tiles. Blocks gives the block geometry (kCols columns per block, kHalves
// runs of 8 blocks per superblock; block b's quads are quads kCols / 4 * b .. of the tile), dot8
// (two quads of every row into a block's int32 sum), term(sum, b), the float of block b before
// it is scaled by dx, and kInputs (the NT tile_inputs passes). The NT inputs share every load of
// the tile (from L2: with one input those loads, not the multiplies, set the pace); each
// output's sequence is the same for any NT.
template <class Tile, int NT, class Blocks>
inline void tile_outputs(const uint8_t* tile, int64_t cols, const int8_t* const* xc,
                         const float* const* dx, const Blocks* blocks, float (*out)[Tile::kRows]) {
  using F = typename Tile::Vec;
  constexpr int RG = Tile::kRows, kQuads = Blocks::kCols / 4, kChains = 8 / NT;
  F a[NT][8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
#pragma GCC unroll 2
    for (int u = 0; u < NT; ++u) a[u][i] = Tile::zero();
  for (int64_t j = 0; j < cols / 256; ++j) {
    for (int h = 0; h < Blocks::kHalves; ++h) {
      // Blocks b = b0 + i, i = 0..7, kChains at a time: NT x kChains independent integer chains
      // (quad k outer), so the multiply-adds overlap and stay in registers.
      const int64_t b0 = 8 * (Blocks::kHalves * j + h);
      // Unrolled too: with i0 a run-time index, a[u][i0 + i] kept a[] in memory (GCC 12: a load,
      // add and store of the fp32 accumulator per block term; the VNNI sb6:4 int8 prefill was 8 %
      // slower with it: 620 against 675 tok/s). GCC only: clang-14 honours the pragma too, and with
      // it the CI's clang sanitizer build spent over 12 minutes on each qmatmul_int8 file (without
      // it the whole CI run took 50 minutes).
#ifndef __clang__
#pragma GCC unroll 8
#endif
      for (int i0 = 0; i0 < 8; i0 += kChains) {
        typename Tile::I sum[NT][kChains];
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i)
#pragma GCC unroll 2
          for (int u = 0; u < NT; ++u) sum[u][i] = Tile::izero();
#pragma GCC unroll 4
        for (int k = 0; k < kQuads; k += 2) {
#pragma GCC unroll 8
          for (int i = 0; i < kChains; ++i) {
            const int64_t b = b0 + i0 + i;
            const uint8_t* wk = tile + (kQuads * b + k) * RG * 4;
#pragma GCC unroll 2
            for (int u = 0; u < NT; ++u) {
              const uint8_t* xk =
                  reinterpret_cast<const uint8_t*>(xc[u]) + Blocks::kCols * b + 4 * k;
              sum[u][i] =
                  blocks[u].dot8(sum[u][i], wk, wk + RG * 4, load_u32(xk), load_u32(xk + 4));
            }
          }
        }
        // Vector operators, never contracted into fused multiply-adds (-ffp-contract=off).
#pragma GCC unroll 8
        for (int i = 0; i < kChains; ++i)
#pragma GCC unroll 2
          for (int u = 0; u < NT; ++u)
            a[u][i0 + i] = a[u][i0 + i] + blocks[u].term(sum[u][i], b0 + i0 + i) * dx[u][j];
      }
    }
  }
#pragma GCC unroll 2
  for (int u = 0; u < NT; ++u)
    Tile::store(out[u], ((a[u][0] + a[u][4]) + (a[u][2] + a[u][6])) +
                            ((a[u][1] + a[u][5]) + (a[u][3] + a[u][7])));
}

// Inputs per pass over a tile.
constexpr int kTileInputs = 2;

// tile_outputs for inputs t .. t + nt - 1 of x (nt <= kTileInputs), blocks_of(t) their terms,
// Blocks::kInputs of them per pass.
template <class Tile, class BlocksOf>
inline void tile_inputs(const uint8_t* tile, const Int8Inputs& x, int64_t t, int nt,
                        BlocksOf&& blocks_of, float (*out)[Tile::kRows]) {
  const int64_t cols = x.cols, nsb = cols / 256;
  const int8_t* xc[kTileInputs];
  const float* dx[kTileInputs];
  using Blocks = decltype(blocks_of(t));
  Blocks blocks[kTileInputs] = {blocks_of(t), blocks_of(t + nt - 1)};
  for (int u = 0; u < nt; ++u) {
    xc[u] = x.codes + (t + u) * cols;
    dx[u] = x.scales + (t + u) * nsb;
  }
  if constexpr (Blocks::kInputs == kTileInputs) {
    if (nt == kTileInputs) return tile_outputs<Tile, kTileInputs>(tile, cols, xc, dx, blocks, out);
  }
  for (int u = 0; u < nt; ++u)
    tile_outputs<Tile, 1>(tile, cols, xc + u, dx + u, blocks + u, out + u);
}

// The tile of rows [r0, r1) in `arena` (slot kBlock0; the set-up's scratch in kBlock1): groups of
// RG rows of gb bytes each, pack(row, n, scratch, group) filling one, then out_of(group, t, nt,
// out) the RG outputs of inputs t .. t + nt - 1 (nt <= kTileInputs), copied to
// y[t * ys + (r - r0)] for t < T.
template <int RG, class Pack, class OutputsOf>
void run_tile(int64_t r0, int64_t r1, int64_t T, int64_t gb, int64_t scratch_bytes, float* y,
              int64_t ys, Arena& arena, Pack&& pack, OutputsOf&& out_of) {
  const int64_t groups = (r1 - r0 + RG - 1) / RG;
  uint8_t* tile = arena.get<uint8_t>(static_cast<size_t>(groups * gb), Arena::kBlock0);
  uint8_t* scratch = arena.get<uint8_t>(static_cast<size_t>(scratch_bytes), Arena::kBlock1);
  for (int64_t g = 0; g < groups; ++g)
    pack(r0 + g * RG, std::min<int64_t>(RG, r1 - r0 - g * RG), scratch, tile + g * gb);
  alignas(64) float out[kTileInputs][RG];
  for (int64_t t = 0; t < T; t += kTileInputs) {
    const int nt = static_cast<int>(std::min<int64_t>(kTileInputs, T - t));
    for (int64_t g = 0; g < groups; ++g) {
      out_of(tile + g * gb, t, nt, out);
      const int64_t n = std::min<int64_t>(RG, r1 - r0 - g * RG);
      for (int u = 0; u < nt; ++u)
        std::memcpy(y + (t + u) * ys + g * RG, out[u], static_cast<size_t>(n) * sizeof(float));
    }
  }
}

// sb6's blocks: 32 columns, t = float(S_b) * s_b + Q_b * m_b (s, m [block][row] in the tile; q
// the input's block sums).
template <class Tile>
struct Sb6TileBlocks {
  // Two inputs per pass over the tile: 1.3-1.5x faster than one on Zen 3 (AVX2).
  static constexpr int kCols = 32, kHalves = 1, kInputs = 2;
  const float *s, *m, *q;
  typename Tile::I dot8(typename Tile::I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0,
                        uint32_t x1) const {
    return Tile::dot8(acc, w0, w1, x0, x1);
  }
  typename Tile::Vec term(typename Tile::I sum, int64_t b) const {
    constexpr int RG = Tile::kRows;
    return Tile::cvt(sum) * Tile::load(dot_impl::F32{}, s + b * RG) +
           q[b] * Tile::load(dot_impl::F32{}, m + b * RG);
  }
};

template <class Tile>
void int8_tile(const Sb6Matrix& w, int64_t r0, int64_t r1, const Int8Inputs& x, const float* sums,
               float* y, int64_t ys, Arena& arena) {
  constexpr int RG = Tile::kRows;
  const int64_t cols = w.cols, nb = cols / 32;
  run_tile<RG>(
      r0, r1, x.T, tile_group_bytes<RG>(cols), pack_scratch_bytes<RG>(cols), y, ys, arena,
      [&](int64_t r, int64_t n, uint8_t* scratch, uint8_t* tile) {
        pack_group<Tile>(w, r, n, scratch, tile);
      },
      [&](const uint8_t* tile, int64_t t, int nt, float(*out)[RG]) {
        const float* s = reinterpret_cast<const float*>(tile + cols * RG);
        tile_inputs<Tile>(
            tile, x, t, nt,
            [&](int64_t u) {
              return Sb6TileBlocks<Tile>{s, s + nb * RG, sums + u * nb};
            },
            out);
      });
}

// ---- sym: the GEMV ----

// s_b = half(qs_b d_j) of blocks 16j + 8h .. 16j + 8h + 7 of a sym row.
inline __m256 sym_scales(const SymRowStreams& row, int64_t j, int h) {
  const __m256i q = _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row.qs + 16 * j + 8 * h)));
  return half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(f16_at(row.d + 2 * j))));
}

// One sym row's codes per superblock j for the tile's set-up: its 256 signed codes in column order
// (sym@8 reads them in place; sym@6 decodes nibbles - byte e of a 16-column block holds columns e
// and e + 8 - and bit planes into buf, u - 32).
template <int Bits>
struct SymInt8Row : SymRowStreams {
  alignas(32) int8_t buf[Bits == 6 ? 256 : 1];

  void init(const SymMatrix& w, int64_t r) { init_row(w, r, Bits); }

  const int8_t* superblock(int64_t j) {
    if constexpr (Bits == 8) {
      return codes + 256 * j;
    } else {
      const __m128i low = _mm_set1_epi8(0x0f);
      for (int v = 0; v < 8; ++v) {  // blocks 16j + 2v and 16j + 2v + 1
        const int64_t u = 16 * j + 2 * v;
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 8 * u));
        const __m128i lo = _mm_and_si128(raw, low);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low);
        __m256i c = _mm256_setr_m128i(_mm_unpacklo_epi64(lo, hi), _mm_unpackhi_epi64(lo, hi));
        c = _mm256_add_epi8(c, _mm256_and_si256(bits_to_bytes(load_u32(qh + 32 * j + 4 * v)),
                                                _mm256_set1_epi8(16)));
        c = _mm256_add_epi8(c, _mm256_and_si256(bits_to_bytes(load_u32(qh2 + 32 * j + 4 * v)),
                                                _mm256_set1_epi8(32)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(buf + 32 * v),
                           _mm256_sub_epi8(c, _mm256_set1_epi8(32)));
      }
      return buf;
    }
  }
};

// Lanes 0-3 / 4-7 of v[0..3] the 4-column sums of blocks 0, 1 / 2, 3 / ... : the 8 block sums
// in block order (per 128-bit lane the hadds give [b0 b2 b4 b6] | [b1 b3 b5 b7]).
inline __m256i block_sums8(const __m256i* v) {
  const __m256i h3 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm256_permutevar8x32_epi32(h3, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Group G (columns 64G .. 64G + 63) of superblock j: its 32 packed bytes' low and high nibbles plus
// their high bits from the rearranged planes h (kernels/qmatmul.h repack_sym6_high_bits) against
// the input's codes in the sym@6 order; lanes 2k, 2k + 1 the halves of block 4G + k's sum.
template <class Dot, int G>
inline __m256i sym6_group_sums(const uint8_t* nib, const __m256i* h, int64_t j, const int8_t* xo) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nib + 128 * j + 32 * G));
  const __m256i lo = _mm256_add_epi8(_mm256_and_si256(raw, low), high_bits<6, 2 * G>(h));
  const __m256i hi =
      _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low), high_bits<6, 2 * G + 1>(h));
  const int8_t* x = xo + 256 * j + 64 * G;
  return _mm256_add_epi32(
      Dot::sums4(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))),
      Dot::sums4(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32))));
}

// The 16 block sums S_b of superblock j of one sym@6 row (nibbles `nib`, rearranged planes `hb`
// of the row), as [blocks 16j .. 16j + 7] and [16j + 8 .. 16j + 15] in block order: the unsigned
// codes u = q + 32 against the input's codes in the sym@6 order (4 blocks per 64 columns: the low
// nibbles of 32 packed bytes are columns 0-7 of the 4 blocks, the high nibbles columns 8-15), then
// 32 times the block's input code sum taken out. No decode to a buffer, no sign moves.
template <class Dot>
inline void sym6_block_sums(const uint8_t* nib, const uint8_t* hb, int64_t j, const int8_t* xo,
                            const int32_t* q16, __m256i* lo_hi) {
  const __m256i h[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb + 64 * j)),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb + 64 * j + 32))};
  const __m256i v[4] = {
      sym6_group_sums<Dot, 0>(nib, h, j, xo), sym6_group_sums<Dot, 1>(nib, h, j, xo),
      sym6_group_sums<Dot, 2>(nib, h, j, xo), sym6_group_sums<Dot, 3>(nib, h, j, xo)};
  // hadd per 128-bit lane: [b0 b1 b4 b5] | [b2 b3 b6 b7] of each 8 blocks, then block order.
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int h = 0; h < 2; ++h) {
    const __m256i sums =
        _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(v[2 * h], v[2 * h + 1]), order);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q16 + 16 * j + 8 * h));
    lo_hi[h] = _mm256_sub_epi32(sums, _mm256_slli_epi32(q, 5));
  }
}

// Rows r, r + rs, ..., NR of them; output k to y[k * ys]. At 8 bits Dot::sums4(u, s) gives the 8
// int32 sums of 4 adjacent products u_c s_c (u unsigned, s signed bytes; exact): each 32 codes q
// meet the input's codes x as |q| . sign(x, q) = q x (|q| <= 128 and |x| <= 127, so no product or
// pair sum overflows int16); at 6 bits sym6_block_sums. Prefetches the rows ahead (RowPrefetch).
template <class Dot, int Bits, int NR>
inline void int8_sym_rows_n(const SymMatrix& w, int64_t r, int64_t rs, const SymInt8Input& x,
                            float* y, int64_t ys) {
  const int64_t cols = w.cols, nsb = cols / 256;
  SymRowStreams row[NR];
  RowPrefetch<NR> ahead;
  for (int k = 0; k < NR; ++k) {
    row[k].init_row(w, r + k * rs, Bits);
    const int64_t ra = r + k * rs + kInt8PrefetchRows;
    if (ra >= w.rows) continue;
    if constexpr (Bits == 8) {
      ahead.set(k, 0, w.codes + ra * cols, 256);
    } else {
      ahead.set(k, 0, w.codes_packed + ra * (cols / 2), 128);
      ahead.set(k, 1, w.hb + ra * nsb * 64, 64);
    }
    _mm_prefetch(reinterpret_cast<const char*>(w.qs + ra * (cols / 16)), _MM_HINT_T1);
  }
  __m256 acc[NR];
  for (int k = 0; k < NR; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    ahead.issue(j);
    const __m256 dx = _mm256_set1_ps(x.scales[j]);
    for (int k = 0; k < NR; ++k) {
      __m256i sums[2];
      if constexpr (Bits == 8) {
        const int8_t* q = row[k].codes + 256 * j;
        const int8_t* xj = x.codes + 256 * j;
        __m256i p[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) {
          const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * v));
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xj + 32 * v));
          p[v] = Dot::sums4(_mm256_abs_epi8(qv), _mm256_sign_epi8(xv, qv));
        }
        sums[0] = block_sums8(p);
        sums[1] = block_sums8(p + 4);
      } else {
        sym6_block_sums<Dot>(row[k].nib, row[k].hb, j, x.ordered, x.block_sums, sums);
      }
      const __m256 lo = _mm256_mul_ps(_mm256_cvtepi32_ps(sums[0]), sym_scales(row[k], j, 0));
      acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(lo, dx));
      const __m256 hi = _mm256_mul_ps(_mm256_cvtepi32_ps(sums[1]), sym_scales(row[k], j, 1));
      acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(hi, dx));
    }
  }
  for (int k = 0; k < NR; ++k) y[k * ys] = reduce8(acc[k]);
}

// Rows the sym GEMV interleaves (from as many equal parts of a thread's range), for every ISA. Two,
// not four: on a Zen 5 (AVX-512 VNNI, 2 threads, 0.1B decode at --precision int8, three
// alternating rounds) four made the AVX-512 build slower than the AVX2 one (sym:8 11.1-13.4 ms
// against 8.8-10.1, sym:6 12.0-14.0 against 7.3-8.2); with two the two builds are level within
// the noise (sym:8 8.0-9.6, sym:6 7.6-8.5). The sb6 GEMV keeps four on AVX-512 (Fmt::kRows): two
// measured slower there (sb6:4 5.8-6.7 against 4.8-5.1 ms).
constexpr int kSymRows = 2;

template <class Dot, int Bits>
void int8_sym_rows(const SymMatrix& w, int64_t r0, int64_t r1, const SymInt8Input& x, float* y) {
  interleaved_rows<kSymRows>(r0, r1, y, [&](int64_t r, int64_t rs, float* yr, int64_t ys, auto n) {
    int8_sym_rows_n<Dot, Bits, decltype(n)::kRows>(w, r, rs, x, yr, ys);
  });
}

template <class Dot>
void int8_sym(const SymMatrix& w, int64_t r0, int64_t r1, const SymInt8Input& x, float* y) {
  if (w.bits == 8) return int8_sym_rows<Dot, 8>(w, r0, r1, x, y);
  return int8_sym_rows<Dot, 6>(w, r0, r1, x, y);
}

// ---- the sym tile (GEMM): the sb6 tile's layout and transposes, blocks of 16 columns ----
//
// Codes [group of 32 columns][quad k = 0..7][row][4 bytes] (quads 0-3 block 2g, 4-7 block 2g + 1)
// as signed bytes plus Tile::sym_bias(Bits) (0, or a bias that makes them unsigned: 128 for
// vpdpbusd, 32 for sym@6 with vpmaddubsw), then the scales s [block][row]. Tile::sym_dot8<Bits>
// adds two quads' products of every row, and Tile::sym_unbias<Bits>(sum, Q_b) takes the bias
// back out of a block's sum (Q_b = the sum of the block's input codes), leaving S_b exactly.

// Bytes of the tile of one group of RG rows (a code byte per column, an fp32 scale per 16
// columns), and of pack_sym_group's scratch (the same, in row order).
template <int RG>
constexpr int64_t sym_tile_group_bytes(int64_t cols) {
  return RG * (cols + cols / 16 * static_cast<int64_t>(sizeof(float)));
}

// The tile of rows [r0, r0 + n), n <= RG (the missing rows get zero codes and scales).
template <class Tile, int Bits>
void pack_sym_group(const SymMatrix& w, int64_t r0, int64_t n, uint8_t* scratch, uint8_t* tile) {
  constexpr int RG = Tile::kRows;
  const int64_t cols = w.cols, nsb = cols / 256;
  uint8_t* rows = scratch;                                    // [row][cols]
  float* rs = reinterpret_cast<float*>(scratch + RG * cols);  // [superblock][row][16]
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(Tile::sym_bias(Bits)));
  for (int rr = 0; rr < RG; ++rr) {
    if (rr >= n) {
      std::memset(rows + rr * cols, 0, static_cast<size_t>(cols));
      for (int64_t j = 0; j < nsb; ++j) std::memset(rs + (j * RG + rr) * 16, 0, 16 * sizeof(float));
      continue;
    }
    SymInt8Row<Bits> row;
    row.init(w, r0 + rr);
    for (int64_t j = 0; j < nsb; ++j) {
      const int8_t* q = row.superblock(j);
      for (int v = 0; v < 8; ++v)
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(rows + rr * cols + 256 * j + 32 * v),
            _mm256_add_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * v)),
                            bias));
      _mm256_storeu_ps(rs + (j * RG + rr) * 16, sym_scales(row, j, 0));
      _mm256_storeu_ps(rs + (j * RG + rr) * 16 + 8, sym_scales(row, j, 1));
    }
  }
  auto* codes = reinterpret_cast<uint32_t*>(tile);
  auto* s = reinterpret_cast<uint32_t*>(tile + cols * RG);
  for (int64_t g = 0; g < cols / 32; ++g)
    transpose8<Tile>(reinterpret_cast<const uint32_t*>(rows + 32 * g), cols / 4,
                     codes + g * 8 * RG);
  for (int64_t j = 0; j < nsb; ++j)
    for (int h = 0; h < 2; ++h)
      transpose8<Tile>(reinterpret_cast<const uint32_t*>(rs + j * RG * 16 + 8 * h), 16,
                       s + (16 * j + 8 * h) * RG);
}

// sym's blocks: 16 columns, t = float(S_b) * s_b, S_b the block's biased sum less the bias times
// the sum q16[b] of its input codes (s [block][row] in the tile).
template <class Tile, int Bits>
struct SymTileBlocks {
  // One input per pass: two measured mixed for sym@8 and slower for sym@6 on Zen 3 (README).
  static constexpr int kCols = 16, kHalves = 2, kInputs = 1;
  const float* s;
  const int32_t* q16;
  typename Tile::I dot8(typename Tile::I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0,
                        uint32_t x1) const {
    return Tile::template sym_dot8<Bits>(acc, w0, w1, x0, x1);
  }
  typename Tile::Vec term(typename Tile::I sum, int64_t b) const {
    return Tile::cvt(Tile::template sym_unbias<Bits>(sum, q16[b])) *
           Tile::load(dot_impl::F32{}, s + b * Tile::kRows);
  }
};

template <class Tile, int Bits>
void int8_sym_tile_bits(const SymMatrix& w, int64_t r0, int64_t r1, const Int8Inputs& x,
                        const int32_t* q16, float* y, int64_t ys, Arena& arena) {
  constexpr int RG = Tile::kRows;
  const int64_t cols = w.cols, nb = cols / 16;
  run_tile<RG>(
      r0, r1, x.T, sym_tile_group_bytes<RG>(cols), sym_tile_group_bytes<RG>(cols), y, ys, arena,
      [&](int64_t r, int64_t n, uint8_t* scratch, uint8_t* tile) {
        pack_sym_group<Tile, Bits>(w, r, n, scratch, tile);
      },
      [&](const uint8_t* tile, int64_t t, int nt, float(*out)[RG]) {
        const float* s = reinterpret_cast<const float*>(tile + cols * RG);
        tile_inputs<Tile>(
            tile, x, t, nt,
            [&](int64_t u) {
              return SymTileBlocks<Tile, Bits>{s, q16 + u * nb};
            },
            out);
      });
}

template <class Tile>
void int8_sym_tile(const SymMatrix& w, int64_t r0, int64_t r1, const Int8Inputs& x,
                   const int32_t* q16, float* y, int64_t ys, Arena& arena) {
  if (w.bits == 8) return int8_sym_tile_bits<Tile, 8>(w, r0, r1, x, q16, y, ys, arena);
  return int8_sym_tile_bits<Tile, 6>(w, r0, r1, x, q16, y, ys, arena);
}

}  // namespace
}  // namespace wick::kernels::qmat
