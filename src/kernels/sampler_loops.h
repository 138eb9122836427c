// The sampler's passes over all V ids (sampling/sampler.cpp): copy, max, shift and clamp, exp and
// sum, probability bins, index collection and the units of the tail table. Written once
// (kernels/sampler_loops_impl.h) as plain loops that the compiler vectorises, compiled once per
// instruction set (scalar/SSE2 and AVX2) without fused multiply-add, and chosen by the one kernel
// dispatch (kernels/cpu_features.h, WICK_ISA honoured). AVX-512 CPUs use the AVX2 build: GCC 12's
// AVX-512 build of the same loops was measured 10 % slower for top-p and top-k sampling of 65536
// ids (bench_sampler BM_TopP09 0.139 vs 0.125 ms, BM_TopK40 0.109 vs 0.097 ms on a Xeon with
// AVX-512) and 5 % faster without truncation. Every table gives bit-identical results: the loops'
// operations are IEEE operations in a fixed order, lane for lane.
//
// Shapes: n elements; the pointers hold at least n elements (out/ids: at least the count
// returned). No allocation; thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace wick::kernels {

struct SamplerLoops {
  // Largest x[i], NaN ignored (-inf if none).
  float (*max_of)(const float* x, size_t n);
  // x[i] /= divisor in place (divisor > 0), then the largest quotient as max_of.
  float (*divide_and_max)(float* x, size_t n, float divisor);
  // out[i] = in[i], NaN -> -inf.
  void (*sanitize_copy)(const float* in, float* out, size_t n);
  // e[i] = max(z[i] - max, -100) (-inf and NaN give -100).
  void (*shift_clamp)(const float* z, size_t n, float max, float* e);
  // shift_clamp, and bin[i] = floor(fl(max - z[i]) * 16) capped at kSamplerBins - 1.
  void (*shift_clamp_bin)(const float* z, size_t n, float max, float* e, uint16_t* bin);
  // e[i] = exp_clamped(e[i]); returns their sum in double as 8 interleaved partial sums (index
  // mod 8) added pairwise.
  double (*exp_in_place_sum)(float* e, size_t n);
  // p[i] = prob_of(e[i], inv_sum), bin[i] = (bits(1) - bits(p[i])) >> 19 capped at
  // kSamplerBins - 1.
  void (*probs_and_bins)(const float* e, size_t n, double inv_sum, float* p, uint16_t* bin);
  // The indices i with bin[i] < until (until <= kSamplerBins), ascending, into out; their count.
  size_t (*collect_below)(const uint16_t* bin, size_t n, uint32_t until, uint32_t* out);
  // The indices i with bin[i] == value, ascending, into out; their count.
  size_t (*collect_equal)(const uint16_t* bin, size_t n, uint16_t value, uint32_t* out);
  // units[i] = round(p * per_ulp) (2^30 when p * per_ulp ends in exactly .5), p = prob[i] when
  // from_prob, else prob_of(ex[i], inv_sum). The caller guarantees p * per_ulp < 2^24.
  void (*units_of)(bool from_prob, const float* prob, const float* ex, double inv_sum, size_t n,
                   double per_ulp, uint32_t* units);
  const char* name;  // "scalar", "avx2"
};

// kernel_table().sampler: the table of active_isa() (throws InputError as active_isa() does).
const SamplerLoops& sampler_loops();
// The table for `isa` (the caller makes sure the CPU has it).
const SamplerLoops& sampler_loops_for(Isa isa);

const SamplerLoops& sampler_loops_scalar();
const SamplerLoops& sampler_loops_avx2();

}  // namespace wick::kernels
