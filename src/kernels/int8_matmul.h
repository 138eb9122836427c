// INT8 weights quantised at load time (`--quantize int8`) and the integer matrix products that
// use them.
//
// Quantisation rule (per row of W, and per row of the input X at every call):
//   scale = max_i |v[i]| / 127                          (fp32 division)
//   code  = round_half_to_even(v[i] / scale)            (fp32 division, then nearest-even)
//           clamped to [-127, 127]
// A row whose max |v| is 0 - or so small that max / 127 underflows to 0 - has scale 0 and all
// codes 0. The clamp only matters when the scale is subnormal (then v / scale can exceed 127.5);
// -128 is never produced, which the AVX2 kernel relies on (see int8_matmul_avx2.cpp).
//
// Product: Y[t, o] = float(S[t, o]) * (scale_w[o] * scale_x[t]) with
//   S[t, o] = sum_i code_w[o, i] * code_x[t, i]
// computed exactly in int32: |S| <= cols * 127 * 127 < 2^31 because cols <= kInt8MaxCols. The
// float epilogue is one fixed expression, so every output is a function of W[o] and X[t] alone:
// row t of a T-row call is bit-identical to a 1-row call on X[t], whatever the instruction set,
// the tiling or the thread count (integer sums do not depend on the order they are added in).
//
// Kernels: scalar reference, AVX2 (vpmaddubsw), AVX-512 VNNI (vpdpbusd), chosen at run time by
// kernels/cpu_features.h (WICK_ISA=scalar|avx2 forces a lower level). All three give identical
// int32 sums, hence identical outputs.
//
// Threads: the kernel pool (kernels/thread_pool.h), over blocks of output rows (and, for T > 1,
// blocks of inputs). Thread-safety: int8_matmul may be called concurrently on one matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace wick::kernels {

// Rows of codes (weights and quantised inputs) are padded with zero codes to a multiple of this
// many columns (the widest SIMD step, 64 bytes), so no kernel needs a tail loop.
constexpr int64_t kInt8ColumnAlign = 64;
// Largest number of columns (in-features) for which the int32 sum is exact:
// 131072 * 127 * 127 = 2,114,060,288 < 2^31 - 1.
constexpr int64_t kInt8MaxCols = int64_t{1} << 17;

inline int64_t int8_padded_cols(int64_t cols) {
  return (cols + kInt8ColumnAlign - 1) / kInt8ColumnAlign * kInt8ColumnAlign;
}

// A quantised matrix W [rows = out, cols = in]; a view, the owner keeps the buffers.
struct Int8Matrix {
  const int8_t* codes = nullptr;  // [rows, stride] row-major; codes at columns >= cols are 0
  const float* scales = nullptr;  // [rows] scale_w (>= 0, finite)
  int64_t rows = 0;
  int64_t cols = 0;    // in-features, 1 <= cols <= kInt8MaxCols
  int64_t stride = 0;  // int8_padded_cols(cols)
};

// Quantises v[0..n) by the rule above into codes[0..n) and returns the scale. If any v[i] is not
// finite (inf, NaN) no code is meaningful: the codes are set to 0 and NaN is returned, so every
// product with this row is NaN (0 * NaN), as the dense product would be non-finite too.
float quantize_row_int8(const float* v, int64_t n, int8_t* codes);

// A quantised matrix that owns its codes and scales.
struct Int8Weights {
  std::vector<int8_t> codes;  // [rows, stride]
  std::vector<float> scales;  // [rows]
  int64_t rows = 0, cols = 0, stride = 0;
  // The first row holding a non-finite weight (its scale is NaN), or -1 when all are finite.
  int64_t first_nonfinite_row = -1;

  Int8Matrix view() const { return {codes.data(), scales.data(), rows, cols, stride}; }
  // Bytes held: codes (padding included) + fp32 scales.
  uint64_t bytes() const { return codes.size() + scales.size() * sizeof(float); }
};

// Quantises every row of a dense F32 / F16 / BF16 matrix (widened exactly to fp32 first), rows
// spread over the kernel pool. Requires 1 <= w.cols <= kInt8MaxCols and w.rows >= 0 (programming
// errors otherwise: std::invalid_argument). The caller checks first_nonfinite_row.
class ThreadPool;

// Rows are quantised in blocks on `pool` (one caller at a time).
Int8Weights quantize_matrix_int8(const MatrixRef& w, ThreadPool& pool);

// Y [T, rows] = X [T, cols] . W^T as defined above; X fp32 row-major, Y must not alias X. T >= 1.
void int8_matmul(const Int8Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
