// The BF16 dot-product peak's loop (vdpbf16ps; compiled with -mavx512f -mavx512bf16, only called
// where the CPU reports AVX512_BF16 - probes.cpp): the limit of the --precision bf16 GEMM
// (kernels/dot_bf16_avx512.cpp) as the FMA chains are the fp32 GEMM's.
#include <immintrin.h>

#include "probe_isa.h"

// GCC 12's conversion intrinsics leave _mm512_undefined_* operands it then reports.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::bench::detail {
namespace {

constexpr int kChains = 12;

// kChains independent chains acc += a . b (16 lanes, each the two products of a pair), `iterations`
// steps each, in registers. a and b hold 2^-10 and 2^-10 (bf16-exact): a chain grows by 2^-19 a
// step, so 2^24 steps stay far from overflow and never reach the subnormals.
float bf16_dot_chains(int64_t iterations, float start) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(start + 0.001f * static_cast<float>(c));
  const __m512 v = _mm512_set1_ps(0x1p-10f);
  const __m512bh a = _mm512_cvtne2ps_pbh(v, v), b = a;
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace

// 32 products (64 FLOPs) per instruction: pairs of 16 lanes.
extern const DotProbe kProbeBf16Dot = {"avx512-bf16", &bf16_dot_chains, 32 * kChains};

}  // namespace wick::bench::detail
