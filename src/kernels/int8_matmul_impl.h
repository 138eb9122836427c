// Private to the INT8 kernels (kernels/int8_matmul.h): the per-instruction-set table that
// int8_matmul.cpp dispatches to, and the entry points the tests and benchmarks use to run one
// instruction set explicitly. Not part of the library's interface.
//
// Division of labour: int8_matmul.cpp quantises the inputs (one shared scalar routine for every
// instruction set), splits the work over the thread pool; the per-ISA kernels compute the exact
// int32 sums S and apply the one float epilogue below, compiled for their instruction set. That
// keeps every ISA's output identical by construction once their sums are (tested exactly).
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/int8_matmul.h"

namespace wick::kernels {
class ThreadPool;
}  // namespace wick::kernels

namespace wick::kernels::int8 {

// One input row, quantised (kernels/int8_matmul.h): its scale and its input outlier columns.
struct InputRow {
  float scale;
  int32_t n_outliers;
  int32_t outlier_cols[kInt8MaxOutliers];  // ascending
};

// The one epilogue of every instruction set. Each kernel file includes it and is compiled with
// -ffp-contract=off (src/CMakeLists.txt: no FMA merges a product and a sum), so every instruction
// set gives the same bits at its own vector width. Internal linkage (static): each file keeps its
// own copy, compiled for its instruction set, so the linker can never hand the scalar path an
// AVX-512 copy (as it could merge the copies of an inline function).
// Y rows [r0, r1) of inputs t0 .. t0 + nt - 1: y[t * y_stride + (r - r0)] from the sums
// s[t * s_stride + (r - r0)], the quantised rows in[t] and the inputs x[t * cols ...] (t counted
// from t0): the epilogue of kernels/int8_matmul.h, one fixed sequence of fp32 operations per
// output. Loops run over rows innermost (they vectorise without changing any output's
// operations). `cols_buf[0 .. n_cols)`: the union of the inputs' outlier columns, ascending and
// distinct (union_outlier_columns()); their dequantised weights, float(code) * scale_w, are
// gathered once per call for all nt inputs (channel outliers recur from token to token) into
// `tile` [n_cols, r1 - r0]. Nothing from <algorithm> here: a template instantiated in this file
// could be merged by the linker with the copy compiled for another instruction set.
[[maybe_unused]] static void epilogue_rows(const Int8Matrix& w, int64_t r0, int64_t r1,
                                           const int32_t* s, int64_t s_stride, const InputRow* in,
                                           int64_t nt, const float* x, int64_t cols, float* y,
                                           int64_t y_stride, const int32_t* cols_buf,
                                           int64_t n_cols, float* tile) {
  const int64_t n = r1 - r0;
  const float* sw = w.scales + r0;
  for (int64_t u = 0; u < n_cols; ++u) {
    const int8_t* code = w.codes + r0 * w.stride + cols_buf[u];
    float* dq = tile + u * n;
    for (int64_t r = 0; r < n; ++r) dq[r] = static_cast<float>(code[r * w.stride]) * sw[r];
  }
  for (int64_t t = 0; t < nt; ++t) {
    float* yt = y + t * y_stride;
    const int32_t* st = s + t * s_stride;
    const float* xt = x + t * cols;
    const float sx = in[t].scale;
    for (int64_t r = 0; r < n; ++r) yt[r] = static_cast<float>(st[r]) * (sw[r] * sx);
    for (int64_t j = 0; j < w.n_outliers; ++j) {
      const float* ow = w.outlier_weights + j * w.rows + r0;
      const float xv = xt[w.outlier_cols[j]];
      for (int64_t r = 0; r < n; ++r) yt[r] = yt[r] + ow[r] * xv;
    }
    for (int32_t j = 0; j < in[t].n_outliers; ++j) {
      const int32_t c = in[t].outlier_cols[j];
      int64_t lo = 0, hi = n_cols - 1;  // c is in cols_buf: binary search
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (cols_buf[mid] < c) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      const float* dq = tile + lo * n;
      const float xv = xt[c];
      for (int64_t r = 0; r < n; ++r) yt[r] = yt[r] + dq[r] * xv;
    }
  }
}

struct Kernels {
  // sums[t * s_stride + (r - r0)] = sum over the w.stride (padded) columns of
  //   w.codes[r, i] * xq[t * x_stride + i]       for r in [r0, r1), t < nt.
  // xq holds codes in [-127, 127] (zero-padded to w.stride); x_stride >= w.stride; w.stride a
  // positive multiple of kInt8ColumnAlign (int8_padded_cols of cols >= 1: no empty rows).
  void (*sums)(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t x_stride,
               int64_t nt, int32_t* sums, int64_t s_stride);
  // epilogue_rows(), compiled for the instruction set.
  void (*epilogue)(const Int8Matrix& w, int64_t r0, int64_t r1, const int32_t* s, int64_t s_stride,
                   const InputRow* in, int64_t nt, const float* x, int64_t cols, float* y,
                   int64_t y_stride, const int32_t* cols_buf, int64_t n_cols, float* tile);
  const char* name;
};

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512_vnni();

// The kernels for `isa`, at the level int8_isa(isa) (kernels/cpu_features.h).
const Kernels& kernels_for(Isa isa);
// True when the CPU supports AVX-512 F/BW/VL and VNNI (the VNNI kernel may run).
using kernels::cpu_has_avx512_vnni;

// int8_matmul with an explicit instruction set (tests, benchmarks); int8_matmul() uses
// active_isa().
void int8_matmul_isa(Isa isa, const Int8Matrix& w, const float* x, int64_t T, float* y,
                     ThreadPool& pool);

}  // namespace wick::kernels::int8
