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

  void init_row(const SymMatrix& w, int64_t r, int bits) {
    const int64_t cols = w.cols;
    codes = bits == 8 ? w.codes + r * cols : nullptr;
    nib = bits == 6 ? w.codes_packed + r * (cols / 2) : nullptr;
    qh = bits == 6 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = bits == 6 ? w.qh2 + r * (cols / 8) : nullptr;
    qs = w.qs + r * (cols / 16);
    d = w.d + r * (cols / 256) * 2;
  }
};

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
