// The probes' loops per instruction set (internal to src/bench): one table per ISA, each defined
// in its own file compiled with that ISA's flags (probe_avx512.cpp, probe_avx2.cpp,
// probe_sse2.cpp, from the one skeleton in probe_kernels.h); probes.cpp picks one by CPUID.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wick::bench::detail {

struct ProbeTable {
  const char* isa;                               // "avx512", "avx2", "sse2"
  size_t read_block;                             // read_sum takes n a multiple of this (floats)
  size_t read_align;                             // ... and p aligned to this (bytes)
  double (*read_sum)(const float* p, size_t n);  // sum of p[0, n)
  float (*fma_chains)(int64_t iterations, float mul);
  int fma_lanes;  // lanes x chains: FLOPs of one step = 2 x this
};

extern const ProbeTable kProbeAvx512, kProbeAvx2, kProbeSse2;

// A dot-product peak's loop beside the FMA chains: the BF16 one (probe_bf16_avx512.cpp).
struct DotProbe {
  const char* isa;                                   // "avx512-bf16"
  float (*chains)(int64_t iterations, float start);  // independent chains in registers
  int products;  // products one step of all chains computes: FLOPs of a step = 2 x this
};

extern const DotProbe kProbeBf16Dot;

}  // namespace wick::bench::detail
