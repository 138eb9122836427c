// Element-wise activations of the block arithmetic (docs/x070-math.md §4), written so that the
// compiler vectorises them for any x86-64 (no branch per element).
#pragma once

#include <cstdint>

namespace wick::kernels {

// h[i] = max(h[i], 0)^2 for i < n (the channel mix's squared ReLU): exactly
// `relu = h > 0 ? h : 0; relu * relu`, so -0 and NaN give +0, +inf gives +inf.
void relu_squared(float* h, int64_t n);

}  // namespace wick::kernels
