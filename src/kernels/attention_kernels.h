// The inner loops of softmax attention over one 64-wide head (RWKV-X attention blocks,
// docs/rwkvx.md §4.2): query-key scores and the probability-weighted sum of values, over cache rows
// `stride` floats apart (the K / V caches hold all heads of a token in one row of C floats).
// One implementation per instruction set (attention_scalar.cpp, attention_avx2.cpp), chosen at run
// time like the dot kernels; each computes every output with a fixed order of operations, so a
// given machine always gives the same bits for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace wick::kernels {

constexpr int kAttentionHead = 64;

struct AttentionKernels {
  // out[i] = scale * Σ_{n<64} q[n] · k[(begin + i) * stride + n] for i < end - begin.
  void (*scores)(const float* q, const float* k, size_t stride, int64_t begin, int64_t end,
                 float scale, float* out);
  // acc[n] += Σ_i w[i] · v[(begin + i) * stride + n] for n < 64, i < end - begin, in order of i.
  void (*accumulate)(const float* w, const float* v, size_t stride, int64_t begin, int64_t end,
                     float* acc);
  const char* name;  // "scalar", "avx2"
};

const AttentionKernels& attention_kernels();  // kernel_table().attention
// The kernels for `isa`: the AVX2 build also on AVX-512 CPUs (there is no AVX-512 one).
const AttentionKernels& attention_kernels_for(Isa isa);
const AttentionKernels& attention_kernels_scalar();
const AttentionKernels& attention_kernels_avx2();  // also used on AVX-512 machines

}  // namespace wick::kernels
