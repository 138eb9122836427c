// AVX2 block sums of the integer sb6 and sym products (kernels/qmatmul_int8_impl.h; only called
// when the CPU has AVX2 + FMA + F16C). sym@8 codes (|q| <= 128) meet the input's codes
// (|x| <= 127) as |q| . sign(x, q): a vpmaddubsw pair is at most 2 * 128 * 127 < 2^15
// (Avx2SymDot, Avx2Tile::sym_dot8); the sym@6 GEMV's unsigned codes u <= 63 need no sign move
// (pairs at most 2 * 63 * 127). The sb6 details: a 32-byte load of the nibbles of 2 blocks splits
// into their low and high halves, which the input's codes match in the sb6 order
// (kernels/qmatmul_impl.h); the high bits come from the rearranged planes (Sb6Matrix::hb), a shift
// and a mask per 32 codes; vpmaddubsw multiplies
// code x input and adds pairs in int16 (at most 2 * 63 * 127 per pair, and the low and high halves'
// pairs added: 32004 < 2^15), vpmaddwd widens to 4-column int32 groups, and horizontal adds gather
// each block's sum.
#include <immintrin.h>

#include "kernels/dot_avx2_trait.h"
#include "kernels/qmatmul_int8_impl.h"

namespace wick::kernels::qmat {
namespace {

template <int Bits>
struct Sb6Avx2Int8 : Sb6RowScales {
  static constexpr int kRows = 2;
  // The high bits come from Sb6Matrix::hb, laid out for this decode (kernels/qmatmul.h
  // repack_sb6_high_bits): a shift and a mask per code vector, where spreading the planes' bits to
  // bytes took a shuffle, a compare and scalar work per 16 columns and plane.
  static constexpr bool kHighBits = true;
  const uint8_t* hb = nullptr;  // the row's high bits, 32 (Bits - 4) bytes per superblock
  // The input's codes of superblock j in the sb6 order, read from memory (L1) by each row's
  // vpmaddubsw: holding its 8 vectors in registers for all the rows spills the accumulators.
  struct Input {
    const int8_t* x;  // x[32 (4g + h)]: the low halves of blocks 4g + 2h, 4g + 2h + 1; x[32
                      // (4g + 2 + h)]: their high halves
  };

  void init(const Sb6Matrix& w, int64_t r) {
    init_row(w, r, Bits);
    if constexpr (Bits >= 5) hb = w.hb + r * (w.cols / 256) * 32 * (Bits - 4);
  }

  static Input load(const Sb6Int8Input& x, int64_t j) { return Input{x.codes + 256 * j}; }

  static __m256i input(const Input& in, int i) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in.x + 32 * i));
  }

  // Codes of the 8 blocks: lo[2g + h] / hi[2g + h] the low / high halves of blocks 4g + 2h and
  // 4g + 2h + 1.
  struct Codes {
    __m256i lo[4], hi[4];
  };

  // Blocks 2P and 2P + 1 of superblock j (one 32-byte load of their nibbles) into c.lo[P] /
  // c.hi[P].
  template <int P>
  void decode_pair(int64_t j, const __m256i* h, Codes& c) const {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nib + 16 * (8 * j + 2 * P)));
    __m256i lo = _mm256_and_si256(raw, low);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
    if constexpr (Bits >= 5) {
      lo = _mm256_add_epi8(lo, high_bits<Bits, 2 * P>(h));
      hi = _mm256_add_epi8(hi, high_bits<Bits, 2 * P + 1>(h));
    }
    c.lo[P] = lo;
    c.hi[P] = hi;
  }

  Codes decode(int64_t j) const {
    __m256i h[2] = {};
    for (int k = 0; k < Bits - 4; ++k)
      h[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb + 32 * ((Bits - 4) * j + k)));
    Codes c;
    decode_pair<0>(j, h, c);
    decode_pair<1>(j, h, c);
    decode_pair<2>(j, h, c);
    decode_pair<3>(j, h, c);
    return c;
  }

  static __m256i sums(const Codes& c, const Input& in) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[4];  // v[2g + h]: lanes 0-3 block 4g + 2h, lanes 4-7 the next block
    for (int g = 0; g < 2; ++g) {
      for (int h = 0; h < 2; ++h) {
        const __m256i pairs =
            _mm256_add_epi16(_mm256_maddubs_epi16(c.lo[2 * g + h], input(in, 4 * g + h)),
                             _mm256_maddubs_epi16(c.hi[2 * g + h], input(in, 4 * g + 2 + h)));
        v[2 * g + h] = _mm256_madd_epi16(pairs, ones);
      }
    }
    // Per 128-bit lane: [b0, b2, b4, b6] | [b1, b3, b5, b7], then put in block order.
    const __m256i h3 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    return _mm256_permutevar8x32_epi32(h3, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
};

// 8 rows per vector: vpmaddubsw of 32-byte tile vectors with 4 input codes broadcast, widened
// and paired by vpmaddwd.
struct Avx2Tile : Avx2 {
  static constexpr int kRows = 8;
  using I = __m256i;
  static I izero() { return _mm256_setzero_si256(); }
  // acc + the 4-column groups w0 . x0 and w1 . x1 of every row: the two groups' int16 pair sums
  // added before one vpmaddwd (each at most 2 * 63 * 127, so their sum fits: 32004 < 2^15).
  static I dot8(I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0, uint32_t x1) {
    const __m256i p0 = _mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(w0)),
                                            _mm256_set1_epi32(static_cast<int>(x0)));
    const __m256i p1 = _mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(w1)),
                                            _mm256_set1_epi32(static_cast<int>(x1)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_add_epi16(p0, p1), _mm256_set1_epi16(1)));
  }
  // The sym tile: sym@6 holds the codes plus 32 (0..63, as sb6's codes) and sums them as dot8
  // does; sym@8 holds the signed codes themselves and sums two quads' products of every row as
  // |q| . sign(x, q) per byte, each vpmaddubsw widened on its own (a pair is at most
  // 2 * 128 * 127 < 2^15, two pairs are not).
  static constexpr int sym_bias(int bits) { return bits == 6 ? 32 : 0; }
  template <int Bits>
  static I sym_dot8(I acc, const uint8_t* w0, const uint8_t* w1, uint32_t x0, uint32_t x1) {
    if constexpr (Bits == 6) {
      return dot8(acc, w0, w1, x0, x1);
    } else {
      const __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w0));
      const __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w1));
      const __m256i p0 = _mm256_maddubs_epi16(
          _mm256_abs_epi8(q0), _mm256_sign_epi8(_mm256_set1_epi32(static_cast<int>(x0)), q0));
      const __m256i p1 = _mm256_maddubs_epi16(
          _mm256_abs_epi8(q1), _mm256_sign_epi8(_mm256_set1_epi32(static_cast<int>(x1)), q1));
      const __m256i ones = _mm256_set1_epi16(1);
      return _mm256_add_epi32(
          acc, _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)));
    }
  }
  template <int Bits>
  static I sym_unbias(I sum, int32_t q) {
    return _mm256_sub_epi32(sum, _mm256_set1_epi32(sym_bias(Bits) * q));
  }
  static Vec cvt(I v) { return _mm256_cvtepi32_ps(v); }
  // The transpose of the tile's set-up (transpose8): row i (8 dwords, `stride` dwords apart) per
  // vector, and the even / odd 128-bit lanes of two vectors [a0 b0] / [a1 b1].
  static I load_rows(const uint32_t* src, int64_t stride, int i) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * stride));
  }
  static I unpacklo32(I a, I b) { return _mm256_unpacklo_epi32(a, b); }
  static I unpackhi32(I a, I b) { return _mm256_unpackhi_epi32(a, b); }
  static I unpacklo64(I a, I b) { return _mm256_unpacklo_epi64(a, b); }
  static I unpackhi64(I a, I b) { return _mm256_unpackhi_epi64(a, b); }
  static I even_lanes(I a, I b) { return _mm256_permute2x128_si256(a, b, 0x20); }
  static I odd_lanes(I a, I b) { return _mm256_permute2x128_si256(a, b, 0x31); }
  static void store_i(uint32_t* p, I v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
};

// The sym GEMV's sums of 4 adjacent products (kernels/qmatmul_int8_impl.h int8_sym_rows_n):
// vpmaddubsw (pairs, at most 2 * 128 * 127 < 2^15), then vpmaddwd with ones.
struct Avx2SymDot {
  static __m256i sums4(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

}  // namespace

const Int8InputKernels& int8_input_kernels_avx2() {
  static const Int8InputKernels k{int8_sb6<Sb6Avx2Int8>,
                                  int8_tile<Avx2Tile>,
                                  int8_sym<Avx2SymDot>,
                                  int8_sym_tile<Avx2Tile>,
                                  Avx2Tile::kRows,
                                  true,
                                  true,
                                  "avx2"};
  return k;
}

}  // namespace wick::kernels::qmat
