// Weights packed into panels: the layout of an outer-product GEMV / GEMM (the BLIS form), in which
// a vector holds several output rows' weights of one input element, so every output is a single
// fused-multiply-add chain and no horizontal sum is ever taken.
//
// Layout of a PanelMatrix [rows, cols] of dtype F32 / F16 / BF16: panel p (p < panel_count(rows))
// holds rows 16 p .. 16 p + 15, k-major: element (row r, column k) is at
//   data[(r / 16) * 16 * cols + k * 16 + r % 16]
// and the rows of the last panel past `rows` are zero. panel_bytes() bytes in all.
//
// Summation order (the same on every instruction set, so the scalar, AVX2 and AVX-512 kernels give
// the same bits): y[t, r] = s_cols where s_0 = +0 and s_{k+1} = fma(w[r][k], x[t][k], s_k) - one
// rounding per step, k in order. The GEMV (T = 1) and the GEMM (T > 1) both follow it, so row t of
// a GEMM equals the GEMV of X[t] bit for bit, whatever the thread count, the tile sizes or where
// the row sits in a batch. It is not the order of kernels/matmul.h (lane-wise partial sums and a
// tree): the two agree to rounding, not in bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"
#include "wick/dtype.h"

namespace wick::kernels {

// Rows per panel (and outputs per GEMV chain group of one vector of 16 fp32 lanes).
inline constexpr int64_t kPanelRows = 16;

// A packed matrix (layout above). `data` is not owned; it must be aligned to the element size.
struct PanelMatrix {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32, F16 or BF16
  int64_t rows = 0;          // outputs
  int64_t cols = 0;          // inputs
};

// Panels a matrix of `rows` rows takes: ceil(rows / 16).
int64_t panel_count(int64_t rows);
// Bytes of the packed form of a rows x cols matrix of `dtype`: panel_count(rows) * 16 * cols
// elements. Throws wick::InternalError (WICK_CHECK) for a dtype other than F32/F16/BF16 or a
// negative size.
size_t panel_bytes(int64_t rows, int64_t cols, DType dtype);

// Packs the row-major matrix w into `dst` (panel_bytes(w.rows, w.cols, w.dtype) bytes, aligned to
// the element size, not overlapping w) in the layout above, the same elements bit for bit, zero
// rows padding the last panel; the panels are shared out on `pool`. Throws wick::InternalError
// (WICK_CHECK) for a matrix that is not F32/F16/BF16 or has no rows or columns.
PanelMatrix pack_panels(const MatrixRef& w, void* dst, ThreadPool& pool);

struct DotKernels;  // kernels/dot.h
// Y [T, rows] = X [T, cols] . W^T in the order above, with the panel kernels of `set` (any ISA's set:
// the bits do not depend on it) or, without that argument, the set the CPU was given
// (dot_kernels()). X and Y are fp32, row-major, and must not overlap. T = 1: blocks of panels
// shared out on `pool`, each streamed once. T > 1: work items of panels x inputs; each item runs
// the columns in blocks of kPanelColumnBlock (a running sum is stored in Y between blocks and
// continued, which keeps the chain's order), widens a block of its fp16 / bf16 panels to fp32
// once in the pool's arena (kBlock0) when kPanelWidenMinInputs or more inputs will pass over it
// (else the tile widens weights as it loads them), and passes one tile of inputs at a time over
// its panels, so the tile stays in L1 while the panels come from L2. Throws wick::InternalError
// (WICK_CHECK) for T < 1 or a matrix that is not F32/F16/BF16 or has no rows or columns, before
// anything is written.
void matmul_panels(const PanelMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);
void matmul_panels(const PanelMatrix& w, const float* x, int64_t T, float* y,
                   const DotKernels& set, ThreadPool& pool);

// Columns one block of the GEMM's running sums covers (see matmul_panels).
inline constexpr int64_t kPanelColumnBlock = 256;
// Inputs from which a GEMM work item widens its 16-bit panels once rather than at every load.
inline constexpr int64_t kPanelWidenMinInputs = 24;

}  // namespace wick::kernels
