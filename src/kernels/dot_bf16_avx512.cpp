// AVX-512 BF16 dot products (vdpbf16ps; compiled with -mavx512bf16 besides the AVX-512 flags, only
// called when the CPU reports AVX512_BF16 - cpu_has_avx512_bf16()): the skeleton of
// kernels/dot_impl.h with bf16 weights and bf16 inputs. A step loads 32 bf16 elements of a row and
// of an input; vdpbf16ps adds the two products of each adjacent pair to one of 16 fp32 lanes.
// Accumulators, row interleaving, tile shape and the lane tree are the AVX-512 trait's.
#include "kernels/dot_avx512_trait.h"

namespace wick::kernels {
namespace {

struct Avx512Bf16 : Avx512 {
  static constexpr const char* kName = "avx512-bf16";
  using Tail = __mmask32;               // the 16-bit elements of the partial last chunk
  static constexpr size_t kLanes = 32;  // elements per step (16 pairs)

  static Tail tail(size_t left) { return static_cast<__mmask32>((uint64_t{1} << left) - 1u); }
  static __m512bh load(BF16, const uint16_t* p) {
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
  }
  static __m512bh load_tail(BF16, const uint16_t* p, Tail m) {
    return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, p));
  }
  static Vec fma(__m512bh w, __m512bh x, Vec acc) { return _mm512_dpbf16_ps(acc, w, x); }
  // The high halves of 16 floats at a time (vcvtneps2bf16 rounds to nearest even, which leaves a
  // bf16 value's bits as they are; NaN stays NaN).
  static void pack(const float* src, uint16_t* dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i))));
    if (i < n) {
      const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
      _mm256_mask_storeu_epi16(
          dst + i, m,
          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i))));
    }
  }
};

}  // namespace

const Bf16DotKernels& bf16_dot_kernels_avx512() {
  return dot_impl::bf16_kernels<Avx512Bf16>();
}

}  // namespace wick::kernels
