// AVX2 + FMA + F16C quantised matrix kernels (kernels/qmatmul.h; only called when the CPU has
// them).
//
// Work is done in units of 32 columns (an sb6 block; a pair of sym blocks). A unit's codes become
// 4 x 8 floats f[0..3] in one of two column orders, and the inputs are read in the same order:
//  * column order (sb6@4, sym@8): f[k] = columns 8k .. 8k+7 (sb6@4 after undoing the nibble split:
//    f = columns 0-7, 8-15, 16-23, 24-31 from zero-extended bytes 0-7 and 8-15);
//  * "byte-lane" order (sb6@5/6, sym@6): the codes are first assembled as 32 bytes in one ymm
//    (nibble split undone with one shift for both halves, bit planes added with a byte shuffle +
//    compare each), then split into 32-bit lanes with shifts and masks: f[g] lane L = byte 4L + g.
//    That costs no shuffles; the inputs are reordered to match once per call (px[8g + L] = x[the
//    column of byte 4L + g] within each group of 32 columns). sb6 bytes are in column order; sym@6
//    bytes 0-7 | 8-15 | 16-23 | 24-31 hold columns 0-7 | 16-23 | 8-15 | 24-31 (its gs-16 nibble
//    split), so lanes 0, 1, 4, 5 hold block 2i and lanes 2, 3, 6, 7 block 2i+1: the unit's two
//    block scales form one vector.
// The order is chosen per format (prepare_sb6 / prepare_sym look at the matrix).
//
// Summation order of one output (fixed, whatever the tile of rows or inputs it is computed in):
//   sb6 superblock: first acc[0] = fma(m[0..7], xbsum[0..7], acc[0]), then its 8 units:
//   sb6 unit i:     b = f0*x0 (mul), fma f1*x1, f2*x2, f3*x3;  acc[i%2] = fma(b, s_i, acc[i%2])
//   sym@6 unit i:   the same b;  acc[i%2] = fma(b, (each lane's block scale), acc[i%2])
//   sym@8 unit i:   b0 = f0*x0 + f1*x1 (mul, fma), b1 = f2*x2 + f3*x3;
//                   acc[0] = fma(b0, s_2i, acc[0]); acc[1] = fma(b1, s_2i+1, acc[1])
//   end:            hsum(acc[0] + acc[1])
// Two accumulators keep the chain of dependent FMAs per output short; each (row, input) pair has
// its own. All arithmetic is explicit FMA / mul / add with no mul feeding an add, so contraction
// by the compiler cannot change results between tile sizes.
//
// Register blocking: a single input is computed for two rows at once (their decodes and FMA
// chains interleave, which the out-of-order core needs to hide the latency of decode + FMA chain,
// and the rows come from the two halves of the work item: two memory streams); batches take 4
// inputs per decoded unit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/hsum_avx2.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"
#include "kernels/qmatmul_rows_impl.h"

namespace wick::kernels::qmat {
namespace {

constexpr int kTile = 4;  // inputs per decoded unit: 4 x 2 accumulators + 4 decoded vectors

// 0xff in byte i of the result where the plane word at p has the bit of byte i's column set.
// Byte i holds column i (Sym6 = false) or sym@6's column order below (Sym6 = true); either way the
// bit is i % 8 of one byte of the word.
template <bool Sym6 = false>
inline __m256i plane_mask(const uint8_t* p) {
  // byte i <- the word's byte holding its column, then test bit i % 8.
  const __m256i spread = Sym6 ? _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                                 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3)
                              : _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load_u32(p))), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

// 32 bytes -> 4 x 8 floats in byte-lane order (f[g] lane L = byte 4L + g), unsigned / signed.
inline void unsigned_bytes_to_f32(__m256i c, __m256* f) {
  const __m256i low = _mm256_set1_epi32(0xff);
  f[0] = _mm256_cvtepi32_ps(_mm256_and_si256(c, low));
  f[1] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(c, 8), low));
  f[2] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(c, 16), low));
  f[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(c, 24));
}
inline void signed_bytes_to_f32(__m256i c, __m256* f) {
  f[0] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 24), 24));
  f[1] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 16), 24));
  f[2] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 8), 24));
  f[3] = _mm256_cvtepi32_ps(_mm256_srai_epi32(c, 24));
}

// b = f0*x0 + f1*x1 + f2*x2 + f3*x3 as one chain (the block partial of a unit).
inline __m256 unit_dot(const __m256* f, const __m256* x) {
  __m256 b = _mm256_mul_ps(f[0], x[0]);
  b = _mm256_fmadd_ps(f[1], x[1], b);
  b = _mm256_fmadd_ps(f[2], x[2], b);
  return _mm256_fmadd_ps(f[3], x[3], b);
}

// ---- sb6 -----------------------------------------------------------------------------------

template <int Bits>
struct Sb6 : Sb6RowScales {
  using Matrix = Sb6Matrix;
  static constexpr bool kAffine = true;

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
      unsigned_bytes_to_f32(c, f);
    }
  }

  void accumulate(int i, const __m256* f, const __m256* x, __m256* acc) const {
    const __m256 b = unit_dot(f, x);
    acc[i % 2] = _mm256_fmadd_ps(b, _mm256_broadcast_ss(s + i), acc[i % 2]);
  }
};

// ---- sym -----------------------------------------------------------------------------------

template <int Bits>
struct Sym : SymRowStreams {
  using Matrix = SymMatrix;
  static constexpr bool kAffine = false;
  // sym@8: s_b per block of the superblock; sym@6: per unit, the scale of each lane's block.
  alignas(32) float s[Bits == 8 ? 16 : 64];

  void init(const SymMatrix& w, int64_t r) { init_row(w, r, Bits); }

  // s_b = half(qs_b d) for the 16 blocks of superblock j.
  void superblock(int64_t j) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * j));
    const __m256 dv = _mm256_set1_ps(f16_at(d + 2 * j));
    const __m256 lo = half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv));
    const __m256 hi =
        half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), dv));
    if constexpr (Bits == 8) {
      _mm256_store_ps(s, lo);
      _mm256_store_ps(s + 8, hi);
    } else {
      for (int p = 0; p < 4; ++p) {
        const __m256i idx = _mm256_setr_epi32(2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p, 2 * p,
                                              2 * p + 1, 2 * p + 1);
        _mm256_store_ps(s + 8 * p, _mm256_permutevar8x32_ps(lo, idx));
        _mm256_store_ps(s + 8 * (p + 4), _mm256_permutevar8x32_ps(hi, idx));
      }
    }
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
      // hold columns 0-7 | 16-23 | 8-15 | 24-31 (see sym6_column).
      const __m256i packed = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      // q = nibble + 16 qh + 32 qh2 - 32: add 16 where qh is set, -32 where qh2 is clear.
      c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask<true>(qh + 4 * u), _mm256_set1_epi8(16)));
      c = _mm256_add_epi8(
          c, _mm256_andnot_si256(plane_mask<true>(qh2 + 4 * u), _mm256_set1_epi8(-32)));
      signed_bytes_to_f32(c, f);
    }
  }

  void accumulate(int i, const __m256* f, const __m256* x, __m256* acc) const {
    if constexpr (Bits == 8) {
      __m256 b0 = _mm256_mul_ps(f[0], x[0]);
      b0 = _mm256_fmadd_ps(f[1], x[1], b0);
      __m256 b1 = _mm256_mul_ps(f[2], x[2]);
      b1 = _mm256_fmadd_ps(f[3], x[3], b1);
      acc[0] = _mm256_fmadd_ps(b0, _mm256_broadcast_ss(s + 2 * i), acc[0]);
      acc[1] = _mm256_fmadd_ps(b1, _mm256_broadcast_ss(s + 2 * i + 1), acc[1]);
    } else {
      const __m256 b = unit_dot(f, x);
      acc[i % 2] = _mm256_fmadd_ps(b, _mm256_load_ps(s + 8 * i), acc[i % 2]);
    }
  }
};

// ---- row kernels ---------------------------------------------------------------------------

// The trait of the row kernel and driver (kernels/qmatmul_rows_impl.h).
struct Avx2Rows {
  static constexpr int kTile = ::wick::kernels::qmat::kTile;
  using Vec = __m256;
  static constexpr int kParts = 4;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec affine(__m256 m, const float* xb, Vec acc) {
    return _mm256_fmadd_ps(m, _mm256_loadu_ps(xb), acc);
  }
  static float reduce(Vec a, Vec b) { return hsum(_mm256_add_ps(a, b)); }
  template <int Bits>
  using Sb6Fmt = Sb6<Bits>;
  template <int Bits>
  using SymFmt = Sym<Bits>;
};

// ---- input preparation ---------------------------------------------------------------------

// Column of byte p of a decoded sym@6 unit (see Sym<6>::decode).
constexpr int sym6_column(int p) {
  return p < 8 || p >= 24 ? p : p < 16 ? p + 8 : p - 8;
}

// Each group of 32 inputs in byte-lane order: px[8g + L] = x[column(4L + g)] (an 8 x 4 transpose,
// with sym@6's byte order when Sym6).
template <bool Sym6>
void to_byte_lane_order(const float* x, int64_t n, float* px) {
  for (int64_t base = 0; base < n; base += kGroup)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 8; ++l)
        px[base + 8 * g + l] = x[base + (Sym6 ? sym6_column(4 * l + g) : 4 * l + g)];
}

const float* prepare_sb6(const Sb6Matrix& w, const float* x, int64_t T, float* px, float* xbsum) {
  const int64_t cols = w.cols, ng = cols / kGroup;
  const bool column_order = w.bits == 4;
  if (!column_order) to_byte_lane_order<false>(x, T * cols, px);
  const float* in = column_order ? x : px;
  // Block sums: the group's four 8-vectors added pairwise, then hsum.
  for (int64_t i = 0; i < T * ng; ++i) {
    const float* p = in + i * kGroup;
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
    const __m256 b = _mm256_add_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24));
    xbsum[i] = hsum(_mm256_add_ps(a, b));
  }
  return in;
}

const float* prepare_sym(const SymMatrix& w, const float* x, int64_t T, float* px) {
  if (w.bits == 8) return x;
  to_byte_lane_order<true>(x, T * w.cols, px);
  return px;
}

}  // namespace

const Kernels& kernels_avx2() {
  static const Kernels k{prepare_sb6,        prepare_sym, sb6_rows<Avx2Rows>,
                         sym_rows<Avx2Rows>, kTile,       "avx2"};
  return k;
}

}  // namespace wick::kernels::qmat
