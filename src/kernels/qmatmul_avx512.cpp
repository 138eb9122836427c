// AVX-512 (F, BW, VL, DQ) quantised matrix kernels (kernels/qmatmul.h; only called when the CPU
// has them). The AVX2 design widened: units of 32 columns (an sb6 block; a pair of sym blocks)
// decoded to 2 x 16 floats in column order, so the inputs are used as they are. sb6@4 zero-extends
// the 16 code bytes to 16 lanes and splits the nibbles there; the other layouts assemble the 32
// codes as bytes in a ymm (nibble split undone with one shift, each bit plane added with one
// masked byte add whose mask is the plane word) and widen each half.
//
// Summation order of one output (fixed, whatever the tile of rows or inputs it is computed in):
//   sb6 superblock:  first acc[0] = fma(m[0..7] | 0, xbsum[0..7] | 0, acc[0]), then its 8 units:
//   sb6 unit i:      b = f0*x0 (mul), fma f1*x1;  acc[i % 2] = fma(b, s_i, acc[i % 2])
//   sym unit i:      acc[0] = fma(f0*x0, s_2i, acc[0]); acc[1] = fma(f1*x1, s_2i+1, acc[1])
//   end:             reduce(acc[0] + acc[1])
// All arithmetic is explicit FMA / mul / add with no mul feeding an add, so contraction by the
// compiler cannot change results between tile sizes. A single input is computed for two rows at
// once (interleaved decodes and FMA chains, two memory streams); batches take up to 8 inputs per
// decoded unit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"
#include "kernels/qmatmul_rows_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own conversion and reduction
// intrinsics as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::qmat {
namespace {

constexpr int kTile = 8;  // inputs per pass over a row: 8 x (2 accumulators) of 32 zmm

// Adds `value` to byte i of c for every bit i set in the 32-bit plane word at p.
inline __m256i add_plane(__m256i c, const uint8_t* p, char value) {
  return _mm256_mask_add_epi8(c, static_cast<__mmask32>(load_u32(p)), c, _mm256_set1_epi8(value));
}

// ---- sb6 -----------------------------------------------------------------------------------

template <int Bits>
struct Sb6 : Sb6RowScales {
  using Matrix = Sb6Matrix;
  static constexpr bool kAffine = true;

  void init(const Sb6Matrix& w, int64_t r) { init_row(w, r, Bits); }

  // Block u as columns 0-15 (f[0]) and 16-31 (f[1]).
  void decode(int64_t u, __m512* f) const {
    if constexpr (Bits == 4) {
      // Byte j holds column j (low nibble) and j + 16 (high nibble).
      const __m512i z =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      f[0] = _mm512_cvtepi32_ps(_mm512_and_si512(z, _mm512_set1_epi32(0x0f)));
      f[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(z, 4));
      return;
    }
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
  void accumulate(int i, const __m512* f, const __m512* x, __m512* acc) const {
    __m512 b = _mm512_mul_ps(f[0], x[0]);
    b = _mm512_fmadd_ps(f[1], x[1], b);
    acc[i % 2] = _mm512_fmadd_ps(b, _mm512_set1_ps(s[i]), acc[i % 2]);
  }
};

// ---- sym -----------------------------------------------------------------------------------

template <int Bits>
struct Sym : SymRowStreams {
  using Matrix = SymMatrix;
  static constexpr bool kAffine = false;
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
  void accumulate(int i, const __m512* f, const __m512* x, __m512* acc) const {
    acc[0] = _mm512_fmadd_ps(_mm512_mul_ps(f[0], x[0]), _mm512_set1_ps(s[2 * i]), acc[0]);
    acc[1] = _mm512_fmadd_ps(_mm512_mul_ps(f[1], x[1]), _mm512_set1_ps(s[2 * i + 1]), acc[1]);
  }
};

// ---- row kernel ----------------------------------------------------------------------------

// The trait of the row kernel and driver (kernels/qmatmul_rows_impl.h).
struct Avx512Rows {
  static constexpr int kTile = ::wick::kernels::qmat::kTile;
  using Vec = __m512;
  static constexpr int kParts = 2;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec affine(__m256 m, const float* xb, Vec acc) {
    return _mm512_fmadd_ps(_mm512_zextps256_ps512(m), _mm512_zextps256_ps512(_mm256_loadu_ps(xb)),
                           acc);
  }
  static float reduce(Vec a, Vec b) { return _mm512_reduce_add_ps(_mm512_add_ps(a, b)); }
  template <int Bits>
  using Sb6Fmt = Sb6<Bits>;
  template <int Bits>
  using SymFmt = Sym<Bits>;
};

// Inputs are used in column order (px unused); xbsum = reduce(x[0..15] + x[16..31]).
const float* prepare_sb6(const Sb6Matrix& w, const float* x, int64_t T, float* px, float* xbsum) {
  const int64_t n = T * (w.cols / kGroup);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = x + i * kGroup;
    xbsum[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)));
  }
  return x;
}

const float* prepare_sym(const SymMatrix& w, const float* x, int64_t T, float* px) {
  return x;
}

}  // namespace

const Kernels& kernels_avx512() {
  static const Kernels k{prepare_sb6,          prepare_sym, sb6_rows<Avx512Rows>,
                         sym_rows<Avx512Rows>, kTile,       "avx512"};
  return k;
}

}  // namespace wick::kernels::qmat
