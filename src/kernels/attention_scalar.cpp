#include "kernels/attention_kernels.h"
#include "kernels/kernel_table.h"

namespace wick::kernels {
namespace {

void scores_scalar(const float* q, const float* k, size_t stride, int64_t begin, int64_t end,
                   float scale, float* out) {
  for (int64_t p = begin; p < end; ++p) {
    const float* kp = k + p * stride;
    float s = 0.f;
    for (int n = 0; n < kAttentionHead; ++n) s += q[n] * kp[n];
    out[p - begin] = s * scale;
  }
}

void accumulate_scalar(const float* w, const float* v, size_t stride, int64_t begin, int64_t end,
                       float* acc) {
  for (int64_t p = begin; p < end; ++p) {
    const float* vp = v + p * stride;
    const float wp = w[p - begin];
    for (int n = 0; n < kAttentionHead; ++n) acc[n] += wp * vp[n];
  }
}

}  // namespace

const AttentionKernels& attention_kernels_scalar() {
  static const AttentionKernels k{scores_scalar, accumulate_scalar, "scalar"};
  return k;
}

const AttentionKernels& attention_kernels_for(Isa isa) {
  return isa == Isa::kScalar ? attention_kernels_scalar() : attention_kernels_avx2();
}

const AttentionKernels& attention_kernels() {
  return kernel_table().attention;
}

}  // namespace wick::kernels
