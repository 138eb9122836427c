#include <cstring>

#include "kernels/dot.h"

namespace wick::kernels {

namespace {

// Eight partial sums, combined pairwise: keeps the rounding error of long rows low and lets the
// compiler vectorise the loop.
template <typename Load>
float dot_generic(size_t n, Load load, const float* x) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += load(i + j) * x[i + j];
  for (; i < n; ++i) acc[i & 7] += load(i) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float dot_f32(const float* w, const float* x, size_t n) {
  return dot_generic(n, [w](size_t i) { return w[i]; }, x);
}
float dot_f16(const uint16_t* w, const float* x, size_t n) {
  return dot_generic(n, [w](size_t i) { return f16_to_f32(w[i]); }, x);
}
float dot_bf16(const uint16_t* w, const float* x, size_t n) {
  return dot_generic(n, [w](size_t i) { return bf16_to_f32(w[i]); }, x);
}

}  // namespace

const DotKernels& dot_kernels_scalar() {
  static const DotKernels k{dot_f32,
                            dot_f16,
                            dot_bf16,
                            gemv_rows_by_dot<dot_f32>,
                            gemv_rows_by_dot_u16<dot_f16>,
                            gemv_rows_by_dot_u16<dot_bf16>,
                            gemm_tile_by_dot<dot_f32>,
                            widen_f16_scalar,
                            widen_bf16_scalar,
                            1,
                            1};
  return k;
}

void widen_f16_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
void widen_bf16_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

const DotKernels& dot_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return dot_kernels_avx512();
    case Isa::kAvx2: return dot_kernels_avx2();
    case Isa::kScalar: break;
  }
  return dot_kernels_scalar();
}

const DotKernels& dot_kernels() {
  static const DotKernels& k = dot_kernels_for(active_isa());
  return k;
}

}  // namespace wick::kernels
