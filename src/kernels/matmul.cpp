#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/dot.h"

namespace wick::kernels {
namespace {

// Rows of W per work item: a block of weight rows stays in L1/L2 while every input row is
// streamed past it.
constexpr int64_t kRowBlock = 16;
// Below this many multiply-adds (~1 ms of work), waking threads costs more than it saves, and on
// a loaded machine spinning OpenMP workers can cost far more.
constexpr int64_t kParallelThreshold = 1 << 22;

template <typename Elem, typename Dot>
void matmul_typed(const Elem* w, int64_t rows, int64_t cols, const float* x, int64_t T, float* y,
                  Dot dot) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const bool parallel = rows * cols * T >= kParallelThreshold && blocks > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * kRowBlock, r1 = std::min(rows, r0 + kRowBlock);
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * cols;
      float* yt = y + t * rows;
      for (int64_t r = r0; r < r1; ++r) yt[r] = dot(w + r * cols, xt, static_cast<size_t>(cols));
    }
  }
}

}  // namespace

void matmul(const MatrixRef& w, const float* x, int64_t T, float* y) {
  const DotKernels& k = dot_kernels();
  switch (w.dtype) {
    case DType::F32:
      matmul_typed(static_cast<const float*>(w.data), w.rows, w.cols, x, T, y, k.f32);
      return;
    case DType::F16:
      matmul_typed(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x, T, y, k.f16);
      return;
    case DType::BF16:
      matmul_typed(static_cast<const uint16_t*>(w.data), w.rows, w.cols, x, T, y, k.bf16);
      return;
    default:
      break;
  }
  __builtin_trap();  // the loader only builds F32/F16/BF16 matrices
}

}  // namespace wick::kernels
