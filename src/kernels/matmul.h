// Dense matrix products with a stored weight matrix W [rows = out, cols = in] (nn.Linear layout,
// fp32 / fp16 / bf16 elements, row-major, element-aligned) and fp32 activations.
//
//   matmul(W, X, T, Y):  Y[t, o] = sum_i W[o, i] * X[t, i]   for t < T, o < rows
//
// T = 1 is the GEMV of the recurrent step; T > 1 the GEMM of the parallel pass. Every output is
// one call of the same dot kernel (kernels/dot.h), so row t of a GEMM equals the GEMV of X[t]
// bit for bit, whatever the thread count. Threads: the kernel pool (kernels/thread_pool.h) over
// blocks of output rows (GEMV) or rows x inputs (GEMM).
#pragma once

#include <cstdint>

#include "wick/dtype.h"

namespace wick::kernels {

struct MatrixRef {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32, F16 or BF16
  int64_t rows = 0;          // outputs
  int64_t cols = 0;          // inputs
};

// X: [T, cols] fp32, Y: [T, rows] fp32 (must not alias X).
class ThreadPool;

// `pool` runs the blocks (and holds their scratch); one caller at a time (kernels/thread_pool.h).
void matmul(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool);

// The product of inputs already rounded to bf16 (Precision::kBf16, wick/model.h; every x value
// must be a bf16 value held as fp32, as base::round_to_bf16 leaves it). With bf16 weights on a
// CPU with AVX-512 BF16 it runs the BF16 dot product (kernels/dot.h: Bf16DotKernels), reading the
// weights in place; otherwise it is matmul(). Either way row t of a GEMM equals the GEMV of X[t]
// bit for bit. Scratch: the pool's caller arena (slot kCaller0) holds X as bf16.
void matmul_bf16_inputs(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
