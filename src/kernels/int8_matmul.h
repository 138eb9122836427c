// INT8 weights quantised at load time (`--quantize int8`) and the integer matrix products that
// use them.
//
// Groups. The in-features are cut into groups of `group` consecutive columns (kInt8GroupCols =
// 128 at load; the last group may be shorter): every row of W has one scale per group, and every
// input row X[t] is quantised with one scale per group too. An outlier in one column then costs
// precision only inside its group, not along the whole row.
//
// Outlier columns. At load, input columns whose largest |weight| exceeds kInt8OutlierRatio times
// the median column maximum of the matrix (at most int8_max_outlier_columns(cols) of them, the
// largest first) are taken out of the integer product: their weights are kept in fp32, exactly as
// stored (widened), and their codes are 0. Those columns of X are also left out of X's group
// scales (their codes are 0) and enter the product in fp32. This is the LLM.int8() decomposition
// with the columns chosen from the weights alone (no activation statistics needed).
//
// Quantisation rule (per group of a row of W, and per group of a row of X at every call):
//   scale = max_i |v[i]| / 127                          (fp32 division)
//   code  = round_half_to_even(v[i] / scale)            (fp32 division, then nearest-even)
//           clamped to [-127, 127]
// A group whose max |v| is 0 - or so small that max / 127 underflows to 0 - has scale 0 and all
// codes 0. The clamp only matters when the scale is subnormal (then v / scale can exceed 127.5);
// -128 is never produced, which the AVX2 kernel relies on (see int8_matmul_avx2.cpp).
//
// Product: with S[t, o, g] = sum_{i in group g} code_w[o, i] * code_x[t, i], computed exactly in
// int32 (|S| <= group * 127 * 127), and the outlier columns c_0 < c_1 < ... < c_{k-1},
//   Y[t, o] = float(S[t,o,0]) * (scale_w[o,0] * scale_x[t,0])
//           + float(S[t,o,1]) * (scale_w[o,1] * scale_x[t,1]) + ...     (groups in order)
//           + W[o, c_0] * X[t, c_0] + ... + W[o, c_{k-1}] * X[t, c_{k-1}]  (outliers in order)
// each product and sum rounded to fp32 on its own, left to right (no FMA). The integer sums do
// not depend on the order they are added in, and the float epilogue is one fixed sequence, so
// every output is a function of W[o] and X[t] alone: row t of a T-row call is bit-identical to a
// 1-row call on X[t], whatever the instruction set, the tiling or the thread count.
//
// Kernels: scalar reference, AVX2 (vpmaddubsw), AVX-512 VNNI (vpdpbusd), chosen at run time by
// kernels/cpu_features.h (WICK_ISA=scalar|avx2 forces a lower level). All three give identical
// int32 group sums, and share the epilogue, hence identical outputs.
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
// Largest number of columns (in-features) accepted (the int32 bound of the per-row sums this
// format had before groups; kept as the limit of --quantize int8).
constexpr int64_t kInt8MaxCols = int64_t{1} << 17;
// Columns per scale group at load (a multiple of kInt8ColumnAlign).
constexpr int64_t kInt8GroupCols = 128;
// A column is an outlier when its largest |weight| exceeds this many times the median over the
// matrix's columns of the largest |weight| of each column.
constexpr float kInt8OutlierRatio = 4.0f;

inline int64_t int8_padded_cols(int64_t cols) {
  return (cols + kInt8ColumnAlign - 1) / kInt8ColumnAlign * kInt8ColumnAlign;
}
inline int64_t int8_groups(int64_t cols, int64_t group) { return (cols + group - 1) / group; }
// At most this many outlier columns per matrix: one per 256 in-features, at least 4 (from 1024
// in-features on, their fp32 weights add at most 4 / 256 bytes per weight, 1.6 %, to the codes;
// only where a matrix has such columns).
inline int64_t int8_max_outlier_columns(int64_t cols) { return cols < 1024 ? 4 : cols / 256; }

// A quantised matrix W [rows = out, cols = in]; a view, the owner keeps the buffers.
struct Int8Matrix {
  const int8_t* codes = nullptr;  // [rows, stride] row-major; codes at columns >= cols are 0
  const float* scales = nullptr;  // [groups, rows]: scale_w of group g of row r at g * rows + r
  int64_t rows = 0;
  int64_t cols = 0;    // in-features, 1 <= cols <= kInt8MaxCols
  int64_t stride = 0;  // int8_padded_cols(cols)
  int64_t group = kInt8GroupCols;  // a multiple of kInt8ColumnAlign
  int64_t groups = 0;              // int8_groups(cols, group)
  // Outlier columns (ascending, their codes are 0) and their fp32 weights [n_outliers, rows].
  const int32_t* outlier_cols = nullptr;
  const float* outlier_weights = nullptr;
  int64_t n_outliers = 0;
};

// Quantises v[0..n) by the rule above (one group) into codes[0..n) and returns the scale. If any
// v[i] is not finite (inf, NaN) no code is meaningful: the codes are set to 0 and NaN is
// returned, so every product with this group is NaN (0 * NaN), as the dense product would be
// non-finite too.
float quantize_row_int8(const float* v, int64_t n, int8_t* codes);

// A quantised matrix that owns its codes, scales and outlier columns.
struct Int8Weights {
  std::vector<int8_t> codes;  // [rows, stride]
  std::vector<float> scales;  // [groups, rows]
  std::vector<int32_t> outlier_cols;    // [k] ascending
  std::vector<float> outlier_weights;   // [k, rows]
  int64_t rows = 0, cols = 0, stride = 0, group = kInt8GroupCols, groups = 0;
  // The first row holding a non-finite weight (a scale or outlier weight is NaN / inf), or -1
  // when all are finite.
  int64_t first_nonfinite_row = -1;

  Int8Matrix view() const {
    return {codes.data(),        scales.data(),
            rows,                cols,
            stride,              group,
            groups,              outlier_cols.data(),
            outlier_weights.data(), static_cast<int64_t>(outlier_cols.size())};
  }
  // Bytes held: codes (padding included) + fp32 scales + outlier columns (indices and weights).
  uint64_t bytes() const {
    return codes.size() + scales.size() * sizeof(float) +
           outlier_cols.size() * sizeof(int32_t) + outlier_weights.size() * sizeof(float);
  }
};

class ThreadPool;

// Quantises a dense F32 / F16 / BF16 matrix (widened exactly to fp32 first): chooses its outlier
// columns (at most max_outliers; a negative value means int8_max_outlier_columns(w.cols)), then
// quantises every group of every row, rows spread in blocks over `pool` (one caller at a time).
// Requires 1 <= w.cols <= kInt8MaxCols, w.rows >= 0 and group a positive multiple of
// kInt8ColumnAlign (programming errors otherwise: std::invalid_argument). The caller checks
// first_nonfinite_row.
Int8Weights quantize_matrix_int8(const MatrixRef& w, ThreadPool& pool,
                                 int64_t group = kInt8GroupCols, int64_t max_outliers = -1);

// Y [T, rows] = X [T, cols] . W^T as defined above; X fp32 row-major, Y must not alias X. T >= 1.
void int8_matmul(const Int8Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
