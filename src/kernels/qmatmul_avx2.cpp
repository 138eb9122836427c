// AVX2 + FMA + F16C decoders of the quantised matrices (kernels/qmatmul_impl.h; only called when
// the CPU has them). Work is done in units of 32 columns (an sb6 block; a pair of sym blocks),
// each decoded to 4 x 8 floats in column order (f[k] = columns 8k .. 8k+7): sb6@4 and sym@8 widen
// the code bytes directly; sb6@5/6 and sym@6 first assemble the 32 codes as bytes in one ymm (the
// nibble split undone with one shift for both halves, each bit plane added with a byte shuffle +
// compare), then widen them. Weights as the dequantiser defines them: sb6 q * s + m (one fused
// multiply-add where q * s is exact, else multiplied then added: this file is compiled with
// -ffp-contract=off; kSb6FloorScale), sym q * s.
#include <immintrin.h>

#include "kernels/dot_avx2_trait.h"
#include "kernels/qmatmul_decode_impl.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"

namespace wick::kernels::qmat {
namespace {

// 0xff in byte i of the result where the plane word at p has the bit of byte i's column set.
// Byte i holds column i (Sym6 = false) or sym@6's column order below (Sym6 = true); either way the
// bit is i % 8 of one byte of the word.
template <bool Sym6 = false>
inline __m256i plane_mask(const uint8_t* p) {
  if constexpr (!Sym6) return bits_to_bytes(load_u32(p));
  return spread_bits(load_u32(p),
                     _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                      1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3));
}

// 32 bytes in column order -> 4 x 8 floats (f[k] = bytes 8k .. 8k+7), unsigned or signed.
template <bool Signed>
inline void bytes_to_f32(__m256i c, __m256* f) {
  const auto widen = [](__m128i v) {
    if constexpr (Signed) {
      return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
    } else {
      return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    }
  };
  const __m128i lo = _mm256_castsi256_si128(c), hi = _mm256_extracti128_si256(c, 1);
  f[0] = widen(lo);
  f[1] = widen(_mm_srli_si128(lo, 8));
  f[2] = widen(hi);
  f[3] = widen(_mm_srli_si128(hi, 8));
}

// ---- sb6 -----------------------------------------------------------------------------------

template <int Bits>
struct Sb6 : Sb6RowScales {
  using Matrix = Sb6Matrix;
  // Rows the fused GEMV interleaves: 4 code streams and FMA chains at 4 bits; 2 for the layouts
  // with bit planes, whose decoders need more of the 16 ymm registers (measured with
  // WICK_ISA=avx2 on a Zen 4: 2 rows 10-25 % faster there, 4 rows 15-30 % faster at 4 bits).
  static constexpr int kGemvRows = Bits == 4 ? 4 : 2;

  void init(const Sb6Matrix& w, int64_t r) { init_row(w, r, Bits); }

  void decode(int64_t u, __m256* f) const {
    const uint8_t* p = nib + 16 * u;
    if constexpr (Bits == 4) {
      // Byte j holds column j (low nibble) and j + 16 (high nibble).
      const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      const __m256i b =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
      const __m256i low = _mm256_set1_epi32(0x0f);
      f[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, low));
      f[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
      f[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
      f[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
    } else {
      const __m256i packed =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      // Low lane: low nibbles (columns 0-15); high lane: high nibbles (columns 16-31).
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask(qh + 4 * u), _mm256_set1_epi8(16)));
      if constexpr (Bits >= 6)
        c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask(qh2 + 4 * u), _mm256_set1_epi8(32)));
      bytes_to_f32<false>(c, f);
    }
  }
  // Block u (= 8j + i) dequantised: q * s_i + m_i, multiplied then added - as one fused
  // multiply-add, which rounds the same wherever q * s_i is exact (kSb6FloorScale).
  void weights(int i, int64_t u, __m256* w) const {
    __m256 f[4];
    decode(u, f);
    const __m256 sv = _mm256_set1_ps(s[i]), mv = _mm256_set1_ps(m[i]);
    if (s[i] != kSb6FloorScale) {
      for (int k = 0; k < 4; ++k) w[k] = _mm256_fmadd_ps(f[k], sv, mv);
    } else {
      for (int k = 0; k < 4; ++k) w[k] = _mm256_add_ps(_mm256_mul_ps(f[k], sv), mv);
    }
  }
};

// ---- sym -----------------------------------------------------------------------------------

template <int Bits>
struct Sym : SymRowStreams {
  using Matrix = SymMatrix;
  static constexpr int kGemvRows = Bits == 8 ? 4 : 2;  // as Sb6's: bit planes at 6 bits
  alignas(32) float s[16];                             // s_b for the 16 blocks of the superblock

  void init(const SymMatrix& w, int64_t r) { init_row(w, r, Bits); }

  // s_b = half(qs_b d) for the 16 blocks of superblock j.
  void superblock(int64_t j) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * j));
    const __m256 dv = _mm256_set1_ps(f16_at(d + 2 * j));
    const __m256 lo = half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv));
    const __m256 hi =
        half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), dv));
    _mm256_store_ps(s, lo);
    _mm256_store_ps(s + 8, hi);
  }

  void decode(int64_t u, __m256* f) const {
    if constexpr (Bits == 8) {
      const int8_t* p = codes + 32 * u;
      for (int k = 0; k < 4; ++k)
        f[k] = _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * k))));
    } else {
      // 16 bytes = blocks 2u, 2u+1 of 8 bytes each (byte j: column j low, j + 8 high). Low
      // nibbles in the low lane, high nibbles in the high lane: bytes 0-7 | 8-15 | 16-23 | 24-31
      // hold columns 0-7 | 16-23 | 8-15 | 24-31 (plane_mask<true> reads the plane bits in that
      // order), put in column order by one qword permutation at the end.
      const __m256i packed = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      // q = nibble + 16 qh + 32 qh2 - 32: add 16 where qh is set, -32 where qh2 is clear.
      c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask<true>(qh + 4 * u), _mm256_set1_epi8(16)));
      c = _mm256_add_epi8(
          c, _mm256_andnot_si256(plane_mask<true>(qh2 + 4 * u), _mm256_set1_epi8(-32)));
      bytes_to_f32<true>(_mm256_permute4x64_epi64(c, 0xD8), f);
    }
  }
  // Blocks 2i, 2i + 1 of the superblock (unit u) dequantised: q * s_b.
  void weights(int i, int64_t u, __m256* w) const {
    __m256 f[4];
    decode(u, f);
    for (int k = 0; k < 4; ++k) w[k] = _mm256_mul_ps(f[k], _mm256_set1_ps(s[2 * i + k / 2]));
  }
};

}  // namespace

const Kernels& kernels_avx2() {
  return packed_kernels<Avx2, Sb6, Sym>();
}

}  // namespace wick::kernels::qmat
