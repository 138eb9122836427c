// Private to the INT8 kernels (kernels/int8_matmul.h): the per-instruction-set table that
// int8_matmul.cpp dispatches to, and the entry points the tests and benchmarks use to run one
// instruction set explicitly. Not part of the library's interface.
//
// Division of labour: int8_matmul.cpp quantises the inputs (one shared scalar routine for every
// instruction set), splits the work over the thread pool and applies the float epilogue (groups
// and outlier columns, kernels/int8_matmul.h); the per-ISA kernels compute only the exact int32
// group sums S.
// That keeps every ISA's output identical by construction once their sums are (tested exactly).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/int8_matmul.h"

namespace wick::kernels {
class ThreadPool;
}  // namespace wick::kernels

namespace wick::kernels::int8 {

struct Kernels {
  // sums[(t * w.groups + g) * s_stride + (r - r0)] = sum over the (padded) columns
  //   i in [g * w.group, min((g + 1) * w.group, w.stride)) of w.codes[r, i] * xq[t * x_stride + i]
  // for r in [r0, r1), t < nt, g < w.groups. xq holds codes in [-127, 127] (zero-padded to
  // w.stride); x_stride >= w.stride; s_stride >= r1 - r0.
  void (*sums)(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t x_stride,
               int64_t nt, int32_t* sums, int64_t s_stride);
  // epilogue_rows() below, compiled for the instruction set (the same operations on each
  // output, so the same bits).
  void (*epilogue)(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s,
                   int64_t s_stride, const float* xs, const float* x, float* y);
  const char* name;
};

// The one epilogue of every instruction set (kernels/int8_matmul.h), for rows [r0, r1) of one
// input: y[r - r0] = sum_g float(S[g][r]) * (scale_w[g, r] * xs[g]) + sum_j W[r, c_j] * x[c_j],
// each operation rounded on its own, groups then outliers in order. Every file that includes it
// is compiled with -ffp-contract=off (src/CMakeLists.txt), so no FMA merges a product and a sum;
// the loops run over rows innermost and vectorise (at any width) without changing any output's
// operations. s: the group sums of the input, s[g * s_stride + (r - r0)].
inline void epilogue_rows(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s,
                          int64_t s_stride, const float* xs, const float* x, float* y) {
  const int64_t n = r1 - r0;
  {
    const float* sw = w.scales + r0;
    const float sx = xs[0];
    for (int64_t r = 0; r < n; ++r) y[r] = static_cast<float>(s[r]) * (sw[r] * sx);
  }
  for (int64_t g = 1; g < w.groups; ++g) {
    const int32_t* sg = s + g * s_stride;
    const float* sw = w.scales + g * w.rows + r0;
    const float sx = xs[g];
    for (int64_t r = 0; r < n; ++r) y[r] = y[r] + static_cast<float>(sg[r]) * (sw[r] * sx);
  }
  for (int64_t j = 0; j < w.n_outliers; ++j) {
    const float* ow = w.outlier_weights + j * w.rows + r0;
    const float xv = x[w.outlier_cols[j]];
    for (int64_t r = 0; r < n; ++r) y[r] = y[r] + ow[r] * xv;
  }
}

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512_vnni();

// The kernels for `isa`: kAvx512 means AVX-512 VNNI when the CPU has it (else the AVX2 kernel,
// which every AVX-512 CPU runs), kAvx2 the AVX2 kernel, kScalar the reference.
const Kernels& kernels_for(Isa isa);
// True when the CPU supports AVX-512 F/BW/VL and VNNI (the VNNI kernel may run).
bool cpu_has_avx512_vnni();

// int8_matmul with an explicit instruction set (tests, benchmarks); int8_matmul() uses
// active_isa().
void int8_matmul_isa(Isa isa, const Int8Matrix& w, const float* x, int64_t T, float* y,
                     ThreadPool& pool);

}  // namespace wick::kernels::int8
