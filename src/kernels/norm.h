// Normalisations of docs/x070-math.md §1.3, one row (token) at a time, fp32 in and out with the
// mean and variance accumulated in double.
#pragma once

#include <cstdint>

namespace wick::kernels {

// LayerNorm over n channels: (x - mean) / sqrt(var + eps) * gamma + beta (biased variance).
// beta may be null (treated as zero). x and y may alias.
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t n,
                double eps);

// GroupNorm with `groups` groups of `size` channels (one group = one head): each group is
// normalised on its own, then the per-channel affine gamma/beta (length groups*size) applied.
void group_norm(const float* x, const float* gamma, const float* beta, float* y, int groups,
                int size, double eps);

}  // namespace wick::kernels
