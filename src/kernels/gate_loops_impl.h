// The time mix's gate loops (kernels/gate_loops.h), written once: each gate_loops*.cpp includes
// this file, compiled for its instruction set with -ffp-contract=off, and returns
// make_gate_table(NAME). The definitions live in an unnamed namespace, so every file has its own
// copy.
#pragma once

#include <cstddef>

#include "kernels/exp_math.h"
#include "kernels/gate_loops.h"

namespace wick::kernels {
namespace {

void decay_rate_key(const float* __restrict w0, const float* __restrict a0,
                    const float* __restrict k_k, const float* __restrict k, float* __restrict w,
                    float* __restrict a, float* __restrict kk, size_t n) {
  for (size_t c = 0; c < n; ++c) {
    // The argument is in [-e^(-1/2), 0] (or NaN), inside exp_clamped's range.
    w[c] = exp_clamped(-kDecayScale * sigmoid(w0[c] + w[c]));
    a[c] = sigmoid(a0[c] + a[c]);
    kk[c] = k[c] * k_k[c];
  }
}

void value_residual(const float* __restrict v0, const float* __restrict gate_in,
                    const float* __restrict first, float* __restrict v, size_t n) {
  for (size_t c = 0; c < n; ++c) v[c] = v[c] + (first[c] - v[c]) * sigmoid(v0[c] + gate_in[c]);
}

void sigmoid_in_place(float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = sigmoid(x[i]);
}

const GateLoops& make_gate_table(const char* name) {
  static const GateLoops table{decay_rate_key, value_residual, sigmoid_in_place, name};
  return table;
}

}  // namespace
}  // namespace wick::kernels
