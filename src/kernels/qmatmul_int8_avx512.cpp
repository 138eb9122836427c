// AVX-512 VNNI block sums of the integer sb6 and sym products (kernels/qmatmul_int8_impl.h; only
// called when the CPU has AVX-512 F/BW/VL and VNNI). A 64-byte load of the nibbles of 4 blocks
// splits into their low halves (low nibbles) and high halves (high nibbles), which the input's
// codes match in the sb6 order (kernels/qmatmul_impl.h); the bit planes are added with one masked
// byte add per half (the low / high 16 bits of each block's plane word); vpdpbusd sums code x input
// in 4-column groups, and a few lane shuffles add the groups of each block.
#include <immintrin.h>

#include "kernels/dot_avx512_trait.h"
#include "kernels/qmatmul_int8_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own shuffle and conversion intrinsics
// as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::qmat {
namespace {

// Adds `value` to the code bytes whose bit is set in the plane words of 4 blocks at p: the low
// halves take bits 0-15 of each word, the high halves bits 16-31.
inline void add_planes(__m512i& lo, __m512i& hi, const uint8_t* p, char value) {
  const __m128i words = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i halves =
      _mm_shuffle_epi8(words, _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __mmask64 ml = static_cast<__mmask64>(_mm_cvtsi128_si64(halves));
  const __mmask64 mh = static_cast<__mmask64>(_mm_extract_epi64(halves, 1));
  const __m512i v = _mm512_set1_epi8(value);
  lo = _mm512_mask_add_epi8(lo, ml, lo, v);
  hi = _mm512_mask_add_epi8(hi, mh, hi, v);
}

template <int Bits>
struct Sb6Vnni : Sb6RowScales {
  static constexpr int kRows = 4;
  static constexpr bool kHighBits = false;  // the planes' words are byte masks here
  struct Input {
    __m512i lo[2], hi[2];  // per group of 4 blocks: the codes of their low / high halves
  };

  void init(const Sb6Matrix& w, int64_t r) { init_row(w, r, Bits); }

  static Input load(const Sb6Int8Input& x, int64_t j) {
    const int8_t* p = x.codes + 256 * j;
    Input in;
    for (int g = 0; g < 2; ++g) {
      in.lo[g] = _mm512_loadu_si512(p + 128 * g);
      in.hi[g] = _mm512_loadu_si512(p + 128 * g + 64);
    }
    return in;
  }

  // Codes of the 8 blocks: lo[g] / hi[g] the low / high halves of blocks 4g .. 4g + 3.
  struct Codes {
    __m512i lo[2], hi[2];
  };

  Codes decode(int64_t j) const {
    const __m512i low = _mm512_set1_epi8(0x0f);
    Codes c;
    for (int g = 0; g < 2; ++g) {
      const int64_t u = 8 * j + 4 * g;  // the group's first block
      const __m512i v = _mm512_loadu_si512(nib + 16 * u);
      __m512i lo = _mm512_and_si512(v, low);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      if constexpr (Bits >= 5) add_planes(lo, hi, qh + 4 * u, 16);
      if constexpr (Bits >= 6) add_planes(lo, hi, qh2 + 4 * u, 32);
      c.lo[g] = lo;
      c.hi[g] = hi;
    }
    return c;
  }

  static __m256i sums(const Codes& c, const Input& in) {
    __m512i acc[2];
    for (int g = 0; g < 2; ++g) {
      // Lane l (4 columns) belongs to block 4g + l / 4.
      acc[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c.lo[g], in.lo[g]),
                                   c.hi[g], in.hi[g]);
    }
    // Per 128-bit lane k: [A0 + A2, B0 + B2, A1 + A3, B1 + B3] (A = acc[0], B = acc[1]), then the
    // two halves added: dword 0 = block k's sum, dword 1 = block 4 + k's.
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[0], acc[1]),
                                       _mm512_unpackhi_epi32(acc[0], acc[1]));
    const __m512i u = _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_BADC));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u));
  }
};

// 16 rows per vector: vpdpbusd of 64-byte tile vectors with 4 input codes broadcast.
struct VnniTile : Avx512 {
  static constexpr int kRows = 16;
  using I = __m512i;
  static I izero() { return _mm512_setzero_si512(); }
  // acc + the 4-column groups w0 . x0 and w1 . x1 of every row.
  static I dot8(I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0, uint32_t x1) {
    acc = _mm512_dpbusd_epi32(acc, _mm512_load_si512(w0), _mm512_set1_epi32(static_cast<int>(x0)));
    return _mm512_dpbusd_epi32(acc, _mm512_load_si512(w1), _mm512_set1_epi32(static_cast<int>(x1)));
  }
  // The sym tile holds the signed codes plus 128 (unsigned for vpdpbusd); a block's sum then
  // exceeds S_b by 128 times the sum of its input codes, taken back out exactly in int32.
  static constexpr int sym_bias(int) { return 128; }
  template <int Bits>
  static I sym_dot8(I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0, uint32_t x1) {
    return dot8(acc, w0, w1, x0, x1);
  }
  template <int Bits>
  static I sym_unbias(I sum, int32_t q) {
    return _mm512_sub_epi32(sum, _mm512_set1_epi32(128 * q));
  }
  static Vec cvt(I v) { return _mm512_cvtepi32_ps(v); }
  // The transpose of the tile's set-up (transpose8): rows i and i + 8 (8 dwords each, `stride`
  // dwords apart) in the low and high 256 bits; the even / odd 128-bit lanes of two vectors
  // interleaved [a0 b0 a2 b2] / [a1 b1 a3 b3].
  static I load_rows(const uint32_t* src, int64_t stride, int i) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * stride))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (i + 8) * stride)), 1);
  }
  static I unpacklo32(I a, I b) { return _mm512_unpacklo_epi32(a, b); }
  static I unpackhi32(I a, I b) { return _mm512_unpackhi_epi32(a, b); }
  static I unpacklo64(I a, I b) { return _mm512_unpacklo_epi64(a, b); }
  static I unpackhi64(I a, I b) { return _mm512_unpackhi_epi64(a, b); }
  static I even_lanes(I a, I b) {
    return _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), b);
  }
  static I odd_lanes(I a, I b) {
    return _mm512_permutex2var_epi64(a, _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15), b);
  }
  static void store_i(uint32_t* p, I v) { _mm512_store_si512(p, v); }
};

// The sym GEMV's sums of 4 adjacent products (kernels/qmatmul_int8_impl.h int8_sym_rows_n): one
// 256-bit vpdpbusd (AVX-512 VL + VNNI; exact in int32), u the unsigned operand (|q| at 8 bits,
// u = q + 32 at 6), s the signed one. 256 bits, not 512: vpsignb, which the sym@8 loop uses to
// move each code's sign onto the input, has no 512-bit form.
struct VnniSymDot {
  static __m256i sums4(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
  }
};

}  // namespace

const Int8InputKernels& int8_input_kernels_avx512_vnni() {
  static const Int8InputKernels k{int8_sb6<Sb6Vnni>,
                                  int8_tile<VnniTile>,
                                  int8_sym<VnniSymDot>,
                                  int8_sym_tile<VnniTile>,
                                  VnniTile::kRows,
                                  false,
                                  true,
                                  "avx512-vnni"};
  return k;
}

}  // namespace wick::kernels::qmat
