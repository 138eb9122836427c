// Dense matrix products with a stored weight matrix W [rows = out, cols = in] (nn.Linear layout,
// fp32 / fp16 / bf16 elements, element-aligned) and fp32 activations.
//
//   matmul(W, X, T, Y):  Y[t, o] = sum_i W[o, i] * X[t, i]   for t < T, o < rows
//
// T = 1 is the GEMV of the recurrent step; T > 1 the GEMM of the parallel pass. W is either
// row-major (MatrixLayout::kRows: every output is one call of the same dot kernel, kernels/dot.h)
// or packed into panels (kPanels: every output one fused-multiply-add chain over k in order,
// kernels/panels.h); either way row t of a GEMM equals the GEMV of X[t] bit for bit, whatever the
// thread count. The two layouts' orders differ, so their results agree to rounding, not in bits.
// Threads: the kernel pool (kernels/thread_pool.h) over blocks of output rows (GEMV) or rows x
// inputs (GEMM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wick/dtype.h"

namespace wick::kernels {

// How a MatrixRef's elements lie: row-major [rows, cols], or in the panels of kernels/panels.h
// (pack_panels() makes them).
enum class MatrixLayout : uint8_t { kRows, kPanels };

struct MatrixRef {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32, F16 or BF16
  int64_t rows = 0;          // outputs
  int64_t cols = 0;          // inputs
  MatrixLayout layout = MatrixLayout::kRows;
};

// Whether the dense kernels (matmul(), kernels/panels.h) take elements of `dtype`: F32, F16, BF16.
inline bool dense_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}
// Throws wick::InternalError (WICK_CHECK) unless w is a dense_dtype() matrix with rows and columns.
void check_dense_matrix(const MatrixRef& w);

// X: [T, cols] fp32, Y: [T, rows] fp32 (must not alias X).
class ThreadPool;

// `pool` runs the blocks (and holds their scratch); one caller at a time (kernels/thread_pool.h).
// T >= 1, w.rows >= 1, w.cols >= 1 (WICK_CHECK).
void matmul(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool);

struct DotKernels;  // kernels/dot.h
// matmul() with the kernels of `set` (any instruction set's, dot_kernels_for(): the tests run
// every ISA's this way) rather than those the CPU was given (dot_kernels()).
void matmul_with(const DotKernels& set, const MatrixRef& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);

// One product of a group (matmul_all): y = x . w^T over the group's T inputs, x [T, w.cols] and
// y [T, w.rows] as in matmul().
struct MatmulCall {
  MatrixRef w;
  const float* x = nullptr;
  float* y = nullptr;
};
// The most products one matmul_all() call takes.
inline constexpr size_t kMaxMatmulCalls = 16;

// matmul() of every call, each output bit for bit what matmul() alone gives, as one pool job: the
// blocks (GEMV) or work items (GEMM) of all the products are shared out together, so independent
// products of a pass - the time mix's r/k/v and LoRA factors at decode, where a 64-row GEMV is a
// few microseconds - pay one wake-up and one barrier instead of one each, and a thread that
// finishes one product's blocks goes on to the next product's. No call's y may overlap any call's
// x or another call's y (the products run concurrently); T >= 1, and every matrix has rows >= 1
// and cols >= 1, as for matmul(). Throws wick::InternalError
// (WICK_CHECK, base/check.h) for more than kMaxMatmulCalls calls or a matrix that is not
// F32/F16/BF16, before any product runs.
void matmul_all(std::span<const MatmulCall> calls, int64_t T, ThreadPool& pool);

// A matrix whose rows are produced as fp32 on demand (the packed formats of kernels/qmatmul.h
// decode their codes this way): decode(ctx, r0, r1, c0, c1, dst) writes columns [c0, c1) of rows
// [r0, r1), c1 - c0 floats each, row-major to dst (c0, c1 multiples of col_block, which divides
// cols). gemv, when not null, computes y[r - r0] = row r . x for r in [r0, r1)
// without storing the rows, bit-identical to the dense fp32 GEMV over decode's rows (a fused
// decoder). Both are called from the pool's threads, concurrently for disjoint rows.
struct DecodedMatrix {
  void (*decode)(const void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                 float* dst) = nullptr;
  void (*gemv)(const void* ctx, int64_t r0, int64_t r1, const float* x, float* y) = nullptr;
  const void* ctx = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t col_block = 1;  // decode's unit of columns (divides cols; 1: any column range)
};

// Y = X . W^T for a decoded matrix, with the fp32 kernels of `dense` over the decoded rows: each
// output is dense.f32(decoded row o, X[t]) bit for bit - what matmul() of an fp32 matrix holding
// the decoded rows gives with the same kernels - so row t of a GEMM equals the GEMV of X[t]
// whatever the thread count. GEMV: w.gemv over blocks of rows, or else rows decoded a few at a
// time into a block that stays in L1/L2 and summed at once; GEMM: each work item decodes its block
// of rows once and runs every tile of its inputs over it (an item spans all T inputs unless there
// are too few row blocks to keep every thread busy; then each span of inputs decodes it again) -
// the row-major tile over the decoded rows, or where decoded_gemm_lane_major() says so the panel
// tile over them packed lane-major (kernels/panels.h), each lane's sum then added in the dot's
// tree (DotKernels::reduce_lanes). Scratch: the pool's arenas (kBlock0, kBlock1) and, lane-major,
// the caller arena's kCaller0 (the inputs reordered). Throws wick::InternalError (WICK_CHECK)
// without a decoder, for rows < 0, cols < 1, T < 1 or a col_block that does not divide cols.
void matmul_decoded(const DecodedMatrix& w, const float* x, int64_t T, float* y,
                    const DotKernels& dense, ThreadPool& pool);

// Whether matmul_decoded runs a GEMM of T inputs over a rows x cols matrix as lane-major panels
// (kernels/panels.h lane_major_chunks: the same bits, faster over long rows and many inputs, for
// matrices of enough rows; matmul.cpp kLaneMajorMinCols / MinInputs / MinRows) with
// the kernel set `dense`, rather than the row-major tile. Thread-safe (no state).
bool decoded_gemm_lane_major(const DotKernels& dense, int64_t rows, int64_t cols, int64_t T);

// The product of inputs already rounded to bf16 (Precision::kBf16, wick/model.h; every x value
// must be a bf16 value held as fp32, as base::round_to_bf16 leaves it). With bf16 weights on a
// CPU with AVX-512 BF16 it runs the BF16 dot product (kernels/dot.h: Bf16DotKernels), reading the
// weights in place; otherwise it is matmul(). Either way row t of a GEMM equals the GEMV of X[t]
// bit for bit. Scratch: the pool's caller arena (slot kCaller0) holds X as bf16. A matrix in
// panels runs matmul() (the BF16 dot product reads rows).
void matmul_bf16_inputs(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
