// The time mix's element-wise steps that evaluate e^x (model/forward.cpp; docs/x070-math.md §4):
// the decay, the in-context learning rate, the output gate and the value-residual gate. Written
// once (kernels/gate_loops_impl.h) as plain loops over kernels/exp_math.h that the compiler
// vectorises, compiled once per instruction set (baseline SSE2, AVX2, AVX-512) without fused
// multiply-add, and chosen by the one kernel dispatch (kernels/kernel_table.h, WICK_ISA
// honoured). Every table gives bit-identical results: the loops' operations are IEEE operations
// in a fixed order, lane for lane, so a row's values do not depend on the ISA, on T or on where
// the row sits in a batch.
//
// Shapes: n elements; every pointer holds at least n floats; outputs may be the inputs named as
// such below, no other overlap. No allocation; thread-safe (pure functions).
#pragma once

#include <cstddef>

#include "kernels/cpu_features.h"

namespace wick::kernels {

// e^(-1/2), the decay's scale: w = exp(-e^(-1/2) * sigmoid(...)) (docs/x070-math.md §4).
inline constexpr float kDecayScale = 0.6065306597126334f;

struct GateLoops {
  // For c < n: w[c] = exp(-kDecayScale * sigmoid(w0[c] + w[c])) (the decay, in place),
  // a[c] = sigmoid(a0[c] + a[c]) (the in-context learning rate, in place) and kk[c] = k[c] *
  // k_k[c] (the removal key before its normalisation).
  void (*decay_rate_key)(const float* w0, const float* a0, const float* k_k, const float* k,
                         float* w, float* a, float* kk, size_t n);
  // v[c] += (first[c] - v[c]) * sigmoid(v0[c] + gate_in[c]) for c < n (the value residual).
  void (*value_residual)(const float* v0, const float* gate_in, const float* first, float* v,
                         size_t n);
  // x[i] = sigmoid(x[i]) for i < n (the output gate's hidden rows).
  void (*sigmoid_in_place)(float* x, size_t n);
  const char* name;  // "scalar", "avx2", "avx512"
};

// kernel_table().gates: the table of active_isa() (throws InputError as active_isa() does).
const GateLoops& gate_loops();
// The table for `isa` (the caller makes sure the CPU has it).
const GateLoops& gate_loops_for(Isa isa);

const GateLoops& gate_loops_scalar();
const GateLoops& gate_loops_avx2();
const GateLoops& gate_loops_avx512();

}  // namespace wick::kernels
