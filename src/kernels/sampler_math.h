// The sampler's scalar numerics, one definition for the vector loops (kernels/sampler_loops.h)
// and the sampler itself (sampling/sampler.cpp), so that every path agrees bit for bit.
#pragma once

#include "kernels/exp_math.h"

namespace wick::kernels {

// Bins of the sampler's lazy order (sampling/sampler.cpp); the last takes everything beyond it.
inline constexpr int kSamplerBins = 1024;

namespace {  // internal linkage, as kernels/exp_math.h says why

// An id's probability from its e = exp(z - max) and 1 / sum(e).
inline float prob_of(float e, double inv_sum) {
  return static_cast<float>(static_cast<double>(e) * inv_sum);
}

}  // namespace

}  // namespace wick::kernels
