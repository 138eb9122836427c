// AVX2 INT8 sums (kernels/int8_matmul_impl.h; only called when the CPU has AVX2).
//
// vpmaddubsw (_mm256_maddubs_epi16) multiplies UNSIGNED bytes of its first operand by SIGNED
// bytes of its second and adds adjacent pairs into int16 with saturation. The sign trick makes it
// exact here: a = |x| (as u8) and b = sign(x) * w (_mm256_sign_epi8: w, -w or 0), so a * b = x * w.
// Both codes are in [-127, 127] (the quantisers never produce -128, so -w never overflows and
// |x| fits in u8), hence |a * b| <= 127 * 127 = 16129 and a pair sum is at most 32258 < 32767:
// no saturation ever happens. vpmaddwd with ones then widens the pair sums to int32 (4 products
// per lane per 32 columns) and they are added up exactly in int32 (|total| < 2^31 by
// kInt8MaxCols). Integer addition is associative, so the result equals the scalar reference.
//
// The loops are the skeleton of kernels/int8_sums_impl.h (register blocking there; results do not
// depend on it); this file supplies the vpmaddubsw steps.
#include <immintrin.h>

#include <algorithm>

#include "kernels/int8_matmul_impl.h"
#include "kernels/int8_sums_impl.h"

namespace wick::kernels::int8 {
namespace {

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// hsum of a, b, c and d in lanes 0 .. 3 (the same interleave-and-add tree as the VNNI file's).
inline __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
  const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
  const __m256i v = _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
  return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// The trait of the skeleton (kernels/int8_sums_impl.h): 32 codes per step; 4 rows per tile for
// one input (the input's |x| and sign are used by four rows), 2 rows for a batch of up to 4 inputs
// (a row's 32 codes are loaded once for four inputs).
struct Avx2 {
  using Acc = __m256i;
  using W = __m256i;
  struct In {
    __m256i x, ax;  // the codes and their absolute values
  };
  static constexpr int kBytes = 32;
  static constexpr int kGemvRows = 4;
  static constexpr int kBatchRows = 2;
  static constexpr bool kOffset = false;
  static Acc zero() { return _mm256_setzero_si256(); }
  static W load_w(const int8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static In load_x(const int8_t* p) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return In{x, _mm256_abs_epi8(x)};
  }
  static Acc dot(Acc acc, W w, const In& x) {
    const __m256i p = _mm256_maddubs_epi16(x.ax, _mm256_sign_epi8(w, x.x));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static Acc offset(Acc off, const In&) { return off; }
  static uint32_t lane_sum(Acc v) { return static_cast<uint32_t>(hsum(v)); }
  static __m128i lane_sums4(Acc a, Acc b, Acc c, Acc d) { return hsum4(a, b, c, d); }
};

}  // namespace

const Kernels& kernels_avx2() {
  static const Kernels k{sums_of<Avx2>, epilogue_here, "avx2"};
  return k;
}

}  // namespace wick::kernels::int8
