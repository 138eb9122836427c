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
};

}  // namespace

const Bf16DotKernels& bf16_dot_kernels_avx512() {
  return dot_impl::bf16_kernels<Avx512Bf16>();
}

}  // namespace wick::kernels
