// The one table of the kernels this process runs: every family's implementation for
// active_isa(), looked up once (thread-safe) from each family's own rule (dot_kernels_for,
// int8::kernels_for, qmat::kernels_for, attention / sampler choices, wkv7_head_kernel) and used
// by every dispatching entry point (dot_kernels(), qmatmul(), int8_matmul(), attention_kernels(),
// sampler_loops(), gate_loops()). describe() names each family's variant for `wick info` and logs,
// since a family may run a lower level than the ISA (the attention and sampler loops use their AVX2
// build on AVX-512 CPUs; INT8 needs VNNI for its AVX-512 kernel).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/gate_loops.h"
#include "kernels/sampler_loops.h"

namespace wick::kernels {

namespace int8 {
struct Kernels;  // kernels/int8_matmul_impl.h
}  // namespace int8
namespace qmat {
struct Kernels;           // kernels/qmatmul_impl.h
struct Int8InputKernels;  // kernels/qmatmul_impl.h
}  // namespace qmat

struct KernelTable {
  Isa isa;
  const DotKernels& dot;                      // dense dot, GEMV, GEMM tile, widening
  const int8::Kernels& int8;                  // --quantize int8 sums and epilogue
  const qmat::Kernels& packed;                // .rwkvq sb6 / sym code decoders (and fused GEMVs)
  const qmat::Int8InputKernels* packed_int8;  // Precision::kInt8 integer sb6 / sym products
  const AttentionKernels& attention;          // RWKV-X softmax attention inner loops
  const SamplerLoops& sampler;                // the sampler's passes over V
  const GateLoops& gates;                     // the time mix's decay and gates (e^x)
  const Bf16DotKernels* bf16_dot;             // Precision::kBf16 products of bf16 weights, or null
  // (family, variant) in a fixed order: dot, bf16-dot, int8, packed, packed-int8, wkv (head size
  // 64), attention, sampler, gates; variants "scalar", "avx2", "avx512", "avx512-vnni",
  // "avx512-bf16", and "fp32-dot" for bf16-dot where the CPU has no BF16 dot product (the dot
  // kernels serve).
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// The table of active_isa(). Throws InputError as active_isa() does (a WICK_ISA that cannot be
// honoured).
const KernelTable& kernel_table();
// The table `isa` would give (tests; the caller makes sure the CPU has it).
KernelTable kernel_table_for(Isa isa);

}  // namespace wick::kernels
