// AVX-512 (F, BW, VL, DQ) decoders of the quantised matrices (kernels/qmatmul_impl.h; only called
// when the CPU has them): units of 32 columns (an sb6 block; a pair of sym blocks) decoded to
// 2 x 16 floats in column order. sb6@4 zero-extends the 16 code bytes to 16 lanes and picks each
// nibble's weight from the block's 16 with vpermps; the other layouts assemble the 32 codes as
// bytes in a ymm (nibble split undone with one shift, each bit plane added with one masked byte
// add whose mask is the plane word) and widen each half. Weights as the dequantiser defines them:
// sb6 q * s + m (one fused multiply-add where q * s is exact, else multiplied then added: this
// file is compiled with -ffp-contract=off; kSb6FloorScale), sym q * s.
#include <immintrin.h>

#include <type_traits>

#include "kernels/dot_avx512_trait.h"
#include "kernels/qmatmul_decode_impl.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own conversion and reduction
// intrinsics as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::qmat {
namespace {

// Adds `value` to byte i of c for every bit i set in the 32-bit plane word at p.
inline __m256i add_plane(__m256i c, const uint8_t* p, char value) {
  return _mm256_mask_add_epi8(c, static_cast<__mmask32>(load_u32(p)), c, _mm256_set1_epi8(value));
}

// ---- sb6 -----------------------------------------------------------------------------------

template <int Bits>
struct Sb6 : Sb6RowScales {
  using Matrix = Sb6Matrix;
  static constexpr int kGemvRows = 4;  // rows the fused GEMV interleaves (code streams, FMA chains)

  void init(const Sb6Matrix& w, int64_t r) { init_row(w, r, Bits); }

  // Block u's codes (5 or 6 bits; weights() picks 4-bit weights from a table) as columns 0-15
  // (f[0]) and 16-31 (f[1]).
  void decode(int64_t u, __m512* f) const {
    static_assert(Bits >= 5);
    const __m256i packed = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
    __m256i c =
        _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                         _mm256_set1_epi8(0x0f));
    if constexpr (Bits >= 5) c = add_plane(c, qh + 4 * u, 16);
    if constexpr (Bits >= 6) c = add_plane(c, qh2 + 4 * u, 32);
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(c)));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(c, 1)));
  }
  // Block u (= 8j + i) dequantised: q * s_i + m_i, multiplied then added. At 4 bits the 16
  // possible weights of the block are computed once (the same operations on q = 0 .. 15) and
  // each code picks its own with a lane permutation (vpermps reads the low 4 bits of each lane),
  // which costs fewer instructions than converting and scaling 32 codes.
  void weights(int i, int64_t u, __m512* w) const {
    const __m512 sv = _mm512_set1_ps(s[i]), mv = _mm512_set1_ps(m[i]);
    if constexpr (Bits == 4) {
      const __m512 q = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      const __m512 table = _mm512_add_ps(_mm512_mul_ps(q, sv), mv);
      // Byte j holds column j (low nibble) and j + 16 (high nibble).
      const __m512i z =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      w[0] = _mm512_permutexvar_ps(z, table);
      w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), table);
    } else {
      __m512 f[2];
      decode(u, f);
      if (s[i] != kSb6FloorScale) {  // q * s_i exact: one rounding either way
        w[0] = _mm512_fmadd_ps(f[0], sv, mv);
        w[1] = _mm512_fmadd_ps(f[1], sv, mv);
      } else {
        w[0] = _mm512_add_ps(_mm512_mul_ps(f[0], sv), mv);
        w[1] = _mm512_add_ps(_mm512_mul_ps(f[1], sv), mv);
      }
    }
  }
};

// ---- sym -----------------------------------------------------------------------------------

template <int Bits>
struct Sym : SymRowStreams {
  using Matrix = SymMatrix;
  static constexpr int kGemvRows = 4;
  alignas(64) float s[16];

  void init(const SymMatrix& w, int64_t r) { init_row(w, r, Bits); }

  // s_b = half(qs_b d) for the 16 blocks of superblock j.
  void superblock(int64_t j) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * j));
    const __m512 sv =
        _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                                                      _mm512_set1_ps(f16_at(d + 2 * j))),
                                        0));
    _mm512_store_ps(s, sv);
  }

  // Blocks 2u (f[0]) and 2u + 1 (f[1]), columns in order.
  void decode(int64_t u, __m512* f) const {
    __m128i lo, hi;
    if constexpr (Bits == 8) {
      lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * u));
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * u + 16));
    } else {
      // 16 bytes = blocks 2u, 2u+1 of 8 bytes each (byte j: column j low, j + 8 high).
      // Qwords (0,0 | 1,1), then shift the second copy of each by 4: columns 0-15 | 16-31.
      const __m256i packed = _mm256_permute4x64_epi64(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u))),
          0x50);
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      c = add_plane(c, qh + 4 * u, 16);
      c = add_plane(c, qh2 + 4 * u, 32);
      c = _mm256_sub_epi8(c, _mm256_set1_epi8(32));
      lo = _mm256_castsi256_si128(c);
      hi = _mm256_extracti128_si256(c, 1);
    }
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
  // Blocks 2i, 2i + 1 of the superblock (unit u) dequantised: q * s_b.
  void weights(int i, int64_t u, __m512* w) const {
    __m512 f[2];
    decode(u, f);
    w[0] = _mm512_mul_ps(f[0], _mm512_set1_ps(s[2 * i]));
    w[1] = _mm512_mul_ps(f[1], _mm512_set1_ps(s[2 * i + 1]));
  }
};

}  // namespace

const Kernels& kernels_avx512() {
  return packed_kernels<Avx512, Sb6, Sym>();
}

}  // namespace wick::kernels::qmat
