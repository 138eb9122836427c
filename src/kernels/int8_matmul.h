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
// Outliers. With one scale per row, a single column far larger than the rest sets the scale and
// leaves the other values of the row a few levels. Trained models have such channels, on both
// sides of the product; each side's are taken out of the integer sum and added in fp32:
// - Weight outlier columns, chosen once at load: the input columns whose largest finite
//   |W[o, c]| exceeds kInt8OutlierRatio times the median over the columns of that maximum (the
//   upper median, element cols / 2 in ascending order; none when it is 0), at most
//   int8_max_outliers(cols) of them, the largest first (ties: the lower column). Their weights are
//   kept in fp32 as stored (widened) and their codes are 0; X's values in those columns enter in
//   fp32 too (their codes are 0 and they are left out of X's scale).
// - Input outlier columns, chosen per input row at every call: X[t] (less the weight outlier
//   columns) is quantised by the rule above; the columns whose code has magnitude
//   >= kInt8InputOutlierCode (32: values above about max |x| / 4) are its outliers when there are
//   at most int8_max_outliers(cols) of them, else those >= 64 (about max |x| / 2) when few
//   enough, else none - so they are taken out only where that shrinks X's scale 2-4 times or
//   more; a heavy tail with many large values is left as it is. The row is then quantised again
//   without them (their codes 0, out of the scale) and they meet the dequantised weight code
//   (code_w[o, c] * scale_w[o]) in fp32. A function of X[t] alone.
//
// Product: with S[t, o] = sum_i code_w[o, i] * code_x[t, i] computed exactly in int32
// (|S| <= cols * 127 * 127 < 2^31 because cols <= kInt8MaxCols), the weight outlier columns
// c_0 < ... < c_{k-1} and the input outlier columns d_0 < ... < d_{m-1} of X[t],
//   Y[t, o] = float(S[t, o]) * (scale_w[o] * scale_x[t])
//           + W[o, c_0] * X[t, c_0] + ... + W[o, c_{k-1}] * X[t, c_{k-1}]
//           + (float(code_w[o, d_0]) * scale_w[o]) * X[t, d_0] + ...
// each product and sum rounded to fp32 on its own, left to right (every int8_matmul*.cpp file is
// compiled with -ffp-contract=off). The integer sums do not depend on the order they are added in
// and the float epilogue is one fixed sequence, so every output is a function of W[o] and X[t]
// alone: row t of a T-row call is bit-identical to a 1-row call on X[t], whatever the instruction
// set, the tiling or the thread count. Without outliers this is the plain per-row product.
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
// A weight column is an outlier when its largest |weight| exceeds this many times the median
// over the matrix's columns of the largest |weight| of each column.
constexpr float kInt8OutlierRatio = 4.0f;
// An input value whose code (at its row's full scale) has at least this magnitude is an outlier
// candidate (see above): about a quarter of the row's max |x|.
constexpr int kInt8InputOutlierCode = 32;
// At most this many outlier columns per side: one per 256 in-features, at least 4 and at most
// 16 (the fp32 weight columns add at most 4 / 256 bytes per weight, 1.6 %, to the codes, and only
// where a matrix has such columns).
constexpr int64_t kInt8MaxOutliers = 16;
inline int64_t int8_max_outliers(int64_t cols) {
  return cols < 1024 ? 4 : cols / 256 < kInt8MaxOutliers ? cols / 256 : kInt8MaxOutliers;
}

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
  // Weight outlier columns (ascending; their codes are 0) and their fp32 weights [n_outliers,
  // rows] (column j's weight of row r at j * rows + r); 0 <= n_outliers <= int8_max_outliers.
  const int32_t* outlier_cols = nullptr;
  const float* outlier_weights = nullptr;
  int64_t n_outliers = 0;
};

// Quantises v[0..n) by the rule above into codes[0..n) and returns the scale. If any v[i] is not
// finite (inf, NaN) no code is meaningful: the codes are set to 0 and NaN is returned, so every
// product with this row is NaN (0 * NaN), as the dense product would be non-finite too.
float quantize_row_int8(const float* v, int64_t n, int8_t* codes);

// A quantised matrix that owns its codes, scales and weight outlier columns.
struct Int8Weights {
  std::vector<int8_t> codes;           // [rows, stride]
  std::vector<float> scales;           // [rows]
  std::vector<int32_t> outlier_cols;   // [k] ascending
  std::vector<float> outlier_weights;  // [k, rows]
  int64_t rows = 0, cols = 0, stride = 0;
  // The first row holding a non-finite weight (its scale or an outlier weight is NaN or inf), or
  // -1 when all are finite.
  int64_t first_nonfinite_row = -1;

  Int8Matrix view() const {
    return {codes.data(),
            scales.data(),
            rows,
            cols,
            stride,
            outlier_cols.data(),
            outlier_weights.data(),
            static_cast<int64_t>(outlier_cols.size())};
  }
  // Bytes held: codes (padding included) + fp32 scales + the outlier columns (indices, weights).
  uint64_t bytes() const {
    return codes.size() + scales.size() * sizeof(float) + outlier_cols.size() * sizeof(int32_t) +
           outlier_weights.size() * sizeof(float);
  }
};

class ThreadPool;

// Quantises a dense F32 / F16 / BF16 matrix (widened exactly to fp32 first): chooses its weight
// outlier columns (at most max_outliers of them; a negative value means int8_max_outliers(cols),
// 0 none), then quantises every row, rows spread in blocks over `pool` (one caller at a time).
// Requires a row-major matrix (MatrixLayout::kRows), 1 <= w.cols <= kInt8MaxCols, w.rows >= 0 and
// max_outliers <= kInt8MaxOutliers (programming errors otherwise: std::invalid_argument). The
// caller checks first_nonfinite_row.
Int8Weights quantize_matrix_int8(const MatrixRef& w, ThreadPool& pool, int64_t max_outliers = -1);

// Y [T, rows] = X [T, cols] . W^T as defined above; X fp32 row-major, Y must not alias X. T >= 1.
void int8_matmul(const Int8Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
