// AVX-512 VNNI INT8 sums (kernels/int8_matmul_impl.h; compiled with -mavx512vnni besides the
// AVX-512 flags, only called when the CPU has AVX-512 F/BW/VL and VNNI - cpu_has_avx512_vnni()).
//
// vpdpbusd (_mm512_dpbusd_epi32) multiplies UNSIGNED bytes of its first operand by SIGNED bytes
// of its second and adds each group of 4 products into an int32 lane, without intermediate
// saturation (it wraps modulo 2^32). The weights are made unsigned by flipping their sign bit,
// u = w XOR 0x80 = w + 128 in [1, 255], and the offset is removed with a second sum:
//   S = sum u * x  -  sum 128 * x        (both computed with vpdpbusd)
// Every step is an addition modulo 2^32, so S is right modulo 2^32; the true sum lies in int32
// (|S| <= cols * 127 * 127 < 2^31 by kInt8MaxCols), so the wrapped result is the exact sum, equal
// to the scalar reference. (Intermediate values may wrap; the end result cannot.)
//
// The loops are the skeleton of kernels/int8_sums_impl.h (register blocking there; results do not
// depend on it); this file supplies the VNNI steps.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/int8_matmul_impl.h"
#include "kernels/int8_sums_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own reduction intrinsics as (maybe)
// used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::int8 {
namespace {

// The 16 int32 lanes added modulo 2^32. The offset trick's partial sums may pass the int32 range
// (only the difference of two of them is exact), so the adds must wrap: the intrinsics' vector
// adds do, whereas _mm512_reduce_add_epi32 adds as int in GCC's header (signed overflow, UB).
inline uint32_t lane_sum_mod32(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  const __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  alignas(16) uint32_t lanes[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), q);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// lane_sum_mod32 of a, b, c and d in lanes 0 .. 3: pairs of accumulators interleaved and added
// until each 128-bit lane holds one partial sum of each, then the four 128-bit lanes added.
inline __m128i lane_sums4_mod32(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The trait of the skeleton (kernels/int8_sums_impl.h): 64 codes per step, 4 rows per tile for
// one input and for a batch (16 accumulators, 4 weight vectors, the input and the bias in the 32
// zmm registers; the offset sums run once per input, outside the tiles).
struct Vnni {
  using Acc = __m512i;
  using W = __m512i;
  using In = __m512i;
  static constexpr int kBytes = 64;
  static constexpr int kGemvRows = 4;
  static constexpr int kBatchRows = 4;
  static constexpr bool kOffset = true;
  static Acc zero() { return _mm512_setzero_si512(); }
  static __m512i bias() { return _mm512_set1_epi8(static_cast<char>(0x80)); }  // as u8: 128
  static W load_w(const int8_t* p) { return _mm512_xor_si512(_mm512_loadu_si512(p), bias()); }
  static In load_x(const int8_t* p) { return _mm512_loadu_si512(p); }
  // vpdpbusd has one form, accumulator = destination; through the intrinsic GCC 12 copied most
  // accumulators of the 4 x 4 tile out to another register and back around it (40 moves in a
  // step of 80 instructions, with the offset sums then still in the tile; objdump). Inline asm
  // with the accumulator a read-write operand leaves one accumulator's copy (2 moves in 29).
  static Acc dot(Acc acc, W u, In x) {
#ifdef __AVX512VNNI__
    asm("vpdpbusd {%2, %1, %0|%0, %1, %2}" : "+v"(acc) : "v"(u), "v"(x));  // AT&T | Intel
    return acc;
#else  // tests/kernels/avx512_emulated: SIMDe's portable intrinsic
    return _mm512_dpbusd_epi32(acc, u, x);
#endif
  }
  static Acc offset(Acc off, In x) {
    return _mm512_dpbusd_epi32(off, bias(), x);
  }
  static uint32_t lane_sum(Acc v) {
    return lane_sum_mod32(v);
  }
  static __m128i lane_sums4(Acc a, Acc b, Acc c, Acc d) {
    return lane_sums4_mod32(a, b, c, d);
  }
};

}  // namespace

const Kernels& kernels_avx512_vnni() {
  static const Kernels k{sums_of<Vnni>, epilogue_here, "avx512-vnni"};
  return k;
}

}  // namespace wick::kernels::int8
