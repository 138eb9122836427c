// Pieces the AVX2 and AVX-512 quantised kernels share (both files are compiled with AVX2 and
// F16C): unaligned loads, fp16 scalars, the fp16 rounding of scales, bit planes spread to bytes,
// the row streams of a sym decoder, and the per-row state of an sb6 decoder with its superblock
// scales (8 blocks of 32 columns per 256-column superblock: s_b = max(half(qs_b d), 1e-8) and
// m_b = half(qm_b dm), docs/rwkvq-format.md, read from the matrix's unpacked fp16 scales). Each
// including file gets its own copy (unnamed namespace).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/qmatmul.h"

namespace wick::kernels::qmat {
namespace {

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// half(v) per lane: round to fp16 (nearest even, subnormals kept) and widen back.
inline __m256 half_of(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, 0));
}

// 0xff in byte i where bit i % 8 of byte i is set.
inline __m256i bit_i_set(__m256i bytes) {
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// 0xff in byte i where bit i % 8 of byte spread[i] (0..3) of w is set.
inline __m256i spread_bits(uint32_t w, __m256i spread) {
  return bit_i_set(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(w)), spread));
}

// The same for the 8 bytes of w (spread[i] 0..7).
inline __m256i spread_bits64(uint64_t w, __m256i spread) {
  return bit_i_set(_mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<int64_t>(w)), spread));
}

// 0xff in byte i where bit i of w is set (a bit plane's word of 32 columns as column bytes).
inline __m256i bits_to_bytes(uint32_t w) {
  return spread_bits(w, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
}

// The floor of an sb6 block scale (s_b = max(half(qs_b d), 1e-8)). Every other s_b is a half
// value (11 significant bits; half's smallest subnormal, 6e-8, is above the floor), so q * s_b
// (q < 64) is exact in fp32 and q * s_b + m_b rounds once whether it is computed as a multiply
// then an add (the dequantiser) or as one fused multiply-add. At the floor the product may round,
// so the decoders multiply, then add there.
constexpr float kSb6FloorScale = 1e-8f;

// One sym row: where its streams start (codes for sym@8; nibbles and the two bit planes for
// sym@6; the 8-bit block scales qs and the superblock scales d).
struct SymRowStreams {
  const int8_t* codes;
  const uint8_t *nib, *qh, *qh2, *d;
  const int8_t* qs;
  const uint8_t* hb;  // sym@6: the row's rearranged planes (SymMatrix::hb), null when not set

  void init_row(const SymMatrix& w, int64_t r, int bits) {
    const int64_t cols = w.cols;
    hb = bits == 6 && w.hb != nullptr ? w.hb + r * (cols / 256) * 64 : nullptr;
    codes = bits == 8 ? w.codes + r * cols : nullptr;
    nib = bits == 6 ? w.codes_packed + r * (cols / 2) : nullptr;
    qh = bits == 6 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = bits == 6 ? w.qh2 + r * (cols / 8) : nullptr;
    qs = w.qs + r * (cols / 16);
    d = w.d + r * (cols / 256) * 2;
  }
};

// Rows [r0, r1) of kernels/qmatmul.h's unpacked sb6 scales (Sb6Matrix::sm) into out[(r - r0) *
// cols / 256 * 16 ...], 8 lanes per superblock's qs and qm: the same fp16 bits as the scalar
// unpacker (F16C rounds to nearest even, keeps subnormals, and quiets a NaN keeping its top
// payload bits, as base::f32_to_f16 does).
inline void unpack_sb6_scales_f16c(const Sb6Matrix& w, int64_t r0, int64_t r1, uint16_t* out) {
  const int64_t nsb = w.cols / 256;
  // Lane i takes the byte(s) holding bits 6i .. 6i+5 of the 6-bit stream, then shifts.
  const __m256i qs_idx = _mm256_setr_epi8(0, -1, -1, -1, 0, 1, -1, -1,   // values 0, 1
                                          1, 2, -1, -1, 2, -1, -1, -1,   // 2, 3
                                          3, -1, -1, -1, 3, 4, -1, -1,   // 4, 5
                                          4, 5, -1, -1, 5, -1, -1, -1);  // 6, 7
  const __m256i qm_idx = _mm256_setr_epi8(6, -1, -1, -1, 6, 7, -1, -1,   // the same, 6 bytes on
                                          7, 8, -1, -1, 8, -1, -1, -1,   //
                                          9, -1, -1, -1, 9, 10, -1, -1,  //
                                          10, 11, -1, -1, 11, -1, -1, -1);
  const __m256i shifts = _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2);
  const __m256i mask6 = _mm256_set1_epi32(63);
  for (int64_t e = r0 * nsb; e < r1 * nsb; ++e) {
    const uint8_t* p = w.qsqm + 12 * e;
    // 12 bytes, without reading past the matrix's last entry.
    const __m128i raw = _mm_insert_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                         static_cast<int>(load_u32(p + 8)), 2);
    const __m256i v = _mm256_broadcastsi128_si256(raw);
    const __m256i qs =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, qs_idx), shifts), mask6);
    const __m256i qm = _mm256_sub_epi32(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, qm_idx), shifts), mask6),
        _mm256_set1_epi32(31));
    const __m256 dv = _mm256_set1_ps(f16_at(w.d + 2 * e)),
                 dmv = _mm256_set1_ps(f16_at(w.dm + 2 * e));
    uint16_t* o = out + (e - r0 * nsb) * 16;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o),
                     _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtepi32_ps(qs), dv), 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 8),
                     _mm256_cvtps_ph(_mm256_mul_ps(_mm256_cvtepi32_ps(qm), dmv), 0));
  }
}

// Rows [r0, r1) of the rearranged planes (kernels/qmatmul.h repack_sb6_high_bits,
// repack_sym6_high_bits), `bits` 5 or 6, into out[(r - r0) * cols / 256 * 32 (bits - 4) ...]:
// spread(plane, row, superblock, v) gives code vector v's 32 bytes with 0xff where that plane's
// bit of the byte's column is set, and each is kept as one bit: bit v at 5 bits, bit 2 (v % 4) +
// plane of the crumbs of the second 32 bytes (v / 4 = 1) or the first at 6. The same bytes as
// the scalar repacker.
template <class Spread>
inline void repack_high_bits_avx2(int64_t cols, int bits, int64_t r0, int64_t r1, uint8_t* out,
                                  Spread spread) {
  const int64_t nsb = cols / 256, per = 32 * (bits - 4);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < nsb; ++j) {
      __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int v = 0; v < 8; ++v)
        for (int plane = 0; plane < bits - 4; ++plane) {
          const int shift = bits == 5 ? v : 2 * (v % 4) + plane;
          __m256i& dst = acc[bits == 5 ? 0 : v / 4];
          dst = _mm256_or_si256(dst,
                                _mm256_and_si256(spread(plane, r, j, v),
                                                 _mm256_set1_epi8(static_cast<char>(1 << shift))));
        }
      uint8_t* o = out + ((r - r0) * nsb + j) * per;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), acc[0]);
      if (bits == 6) _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), acc[1]);
    }
}

// Sb6Matrix::hb: vector v = 2p + half holds columns 16 half .. 16 half + 15 of block 2p (bytes
// 0-15), then of block 2p + 1 (bytes 16-31).
inline void repack_sb6_high_bits_avx2(const Sb6Matrix& w, int64_t r0, int64_t r1, uint8_t* out) {
  repack_high_bits_avx2(w.cols, w.bits, r0, r1, out, [&](int plane, int64_t r, int64_t j, int v) {
    const int p = v / 2;
    const uint8_t* src = (plane == 0 ? w.qh : w.qh2) + r * (w.cols / 8) + 4 * (8 * j + 2 * p);
    const uint32_t a = load_u32(src), b = load_u32(src + 4);
    return bits_to_bytes(v % 2 == 0 ? (a & 0xffffu) | (b << 16) : (a >> 16) | (b & 0xffff0000u));
  });
}

// SymMatrix::hb: per group g of 64 columns, each plane's 8 bytes spread to the two code vectors
// v = 2g + half (low nibbles, half 0: plane bytes 0, 2, 4, 6; high: 1, 3, 5, 7).
inline void repack_sym6_high_bits_avx2(const SymMatrix& w, int64_t r0, int64_t r1, uint8_t* out) {
  const __m256i lo_bytes = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                            4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
  const __m256i hi_bytes = _mm256_add_epi8(lo_bytes, _mm256_set1_epi8(1));
  repack_high_bits_avx2(w.cols, 6, r0, r1, out, [&](int plane, int64_t r, int64_t j, int v) {
    uint64_t bits;
    std::memcpy(&bits, (plane == 0 ? w.qh : w.qh2) + r * (w.cols / 8) + 32 * j + 8 * (v / 2), 8);
    return spread_bits64(bits, v % 2 == 0 ? lo_bytes : hi_bytes);
  });
}

// x shifted left by N bits in each 16-bit lane (right by -N when N < 0).
template <int N>
inline __m256i shift16(__m256i x) {
  if constexpr (N >= 0) {
    return _mm256_slli_epi16(x, N);
  } else {
    return _mm256_srli_epi16(x, -N);
  }
}

// Bits 4 and 5 of code vector V's bytes (kernels/qmatmul.h repack_sb6_high_bits,
// repack_sym6_high_bits) from a superblock's rearranged planes h (Bits - 4 vectors): at 5 bits
// bit V of each byte moved to bit 4, at 6 bits the crumb at bits 2 (V % 4) of h[V / 4] moved to
// bits 4-5. The 16-bit shifts move no masked bit across a byte: every source bit lies in its byte.
template <int Bits, int V>
inline __m256i high_bits(const __m256i* h) {
  if constexpr (Bits == 5) {
    return _mm256_and_si256(shift16<4 - V>(h[0]), _mm256_set1_epi8(0x10));
  } else {
    return _mm256_and_si256(shift16<4 - 2 * (V % 4)>(h[V / 4]), _mm256_set1_epi8(0x30));
  }
}

// One sb6 row: where its streams start, and the scales of the current superblock (read from the
// matrix's unpacked fp16 scales `sm`, kernels/qmatmul.h).
struct Sb6RowScales {
  const uint8_t *nib, *qh, *qh2;
  const uint16_t* sm;
  alignas(32) float s[8];
  alignas(32) float m[8];

  void init_row(const Sb6Matrix& w, int64_t r, int bits) {
    const int64_t cols = w.cols;
    nib = w.codes_packed + r * (cols / 2);
    qh = bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
    sm = w.sm + r * (cols / 256) * 16;
  }

  // s_b = max(half(qs_b d), 1e-8) (to s[]) and m_b = half(qm_b dm) (to m[]) for the 8 blocks.
  void superblock(int64_t j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sm + 16 * j));
    // max(floor, s) with s second: a NaN s stays NaN, as std::max(s, floor) leaves it.
    _mm256_store_ps(s, _mm256_max_ps(_mm256_set1_ps(kSb6FloorScale),
                                     _mm256_cvtph_ps(_mm256_castsi256_si128(v))));
    _mm256_store_ps(m, _mm256_cvtph_ps(_mm256_extracti128_si256(v, 1)));
  }
};

}  // namespace
}  // namespace wick::kernels::qmat
