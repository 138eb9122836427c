#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/dot.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace {

// GEMV (T = 1): blocks of output rows; each block streams its rows once, several at a time.
constexpr int64_t kGemvBlockRows = 64;
// Below this many weights a GEMV runs on the calling thread (waking a worker costs ~1-2 us).
constexpr int64_t kGemvParallelWeights = 1 << 15;

// GEMM (T > 1): work items of (4 tiles of) rows x kGemmBlockInputs inputs. The rows are widened to
// fp32 once per item into a per-thread buffer (L2-sized) and reused by every input of the item;
// inputs stay in L1 while a tile of rows passes over them.
constexpr int64_t kGemmTilesPerBlock = 4;
constexpr int64_t kGemmBlockInputs = 48;

const void* row_ptr(const MatrixRef& w, int64_t row) {
  return static_cast<const uint8_t*>(w.data) + row * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
}

void gemv_block(const DotKernels& k, const MatrixRef& w, const float* x, int64_t r0, int64_t r1,
                float* y) {
  const int nr = static_cast<int>(r1 - r0);
  const size_t n = static_cast<size_t>(w.cols);
  switch (w.dtype) {
    case DType::F32:
      return k.gemv_f32(static_cast<const float*>(row_ptr(w, r0)), n, x, n, nr, y + r0);
    case DType::F16:
      return k.gemv_f16(static_cast<const uint16_t*>(row_ptr(w, r0)), n, x, n, nr, y + r0);
    case DType::BF16:
      return k.gemv_bf16(static_cast<const uint16_t*>(row_ptr(w, r0)), n, x, n, nr, y + r0);
    default:
      __builtin_trap();  // the loader only builds F32/F16/BF16 matrices
  }
}

void gemm_item(const DotKernels& k, const MatrixRef& w, const float* x, int64_t T, float* y,
               int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const size_t n = static_cast<size_t>(w.cols);
  const float* rows = nullptr;
  thread_local std::vector<float> widened;
  if (w.dtype == DType::F32) {
    rows = static_cast<const float*>(row_ptr(w, r0));
  } else {
    widened.resize(static_cast<size_t>((r1 - r0) * w.cols));
    const Widen widen = w.dtype == DType::F16 ? k.widen_f16 : k.widen_bf16;
    widen(static_cast<const uint16_t*>(row_ptr(w, r0)), widened.data(), (r1 - r0) * n);
    rows = widened.data();
  }
  for (int64_t t = t0; t < t1; t += k.tile_inputs) {
    const int nt = static_cast<int>(std::min<int64_t>(k.tile_inputs, t1 - t));
    for (int64_t r = r0; r < r1; r += k.tile_rows) {
      const int nr = static_cast<int>(std::min<int64_t>(k.tile_rows, r1 - r));
      k.gemm_tile(rows + (r - r0) * n, n, x + t * n, n, n, nr, nt, y + t * w.rows + r,
                  static_cast<size_t>(w.rows));
    }
  }
}

}  // namespace

void matmul(const MatrixRef& w, const float* x, int64_t T, float* y) {
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16) __builtin_trap();
  const DotKernels& k = dot_kernels();
  if (T == 1) {
    const int64_t blocks = (w.rows + kGemvBlockRows - 1) / kGemvBlockRows;
    auto block = [&](int64_t b) {
      const int64_t r0 = b * kGemvBlockRows, r1 = std::min(w.rows, r0 + kGemvBlockRows);
      gemv_block(k, w, x, r0, r1, y);
    };
    if (w.rows * w.cols < kGemvParallelWeights) {
      for (int64_t b = 0; b < blocks; ++b) block(b);
    } else {
      parallel_for(blocks, block);
    }
    return;
  }
  const int64_t block_rows = kGemmTilesPerBlock * k.tile_rows;
  const int64_t row_blocks = (w.rows + block_rows - 1) / block_rows;
  const int64_t input_blocks = (T + kGemmBlockInputs - 1) / kGemmBlockInputs;
  auto item = [&](int64_t i) {
    const int64_t rb = i % row_blocks, tb = i / row_blocks;
    const int64_t r0 = rb * block_rows, r1 = std::min(w.rows, r0 + block_rows);
    const int64_t t0 = tb * kGemmBlockInputs, t1 = std::min(T, t0 + kGemmBlockInputs);
    gemm_item(k, w, x, T, y, r0, r1, t0, t1);
  };
  if (w.rows * w.cols * T < kGemvParallelWeights) {
    for (int64_t i = 0; i < row_blocks * input_blocks; ++i) item(i);
  } else {
    parallel_for(row_blocks * input_blocks, item);
  }
}

}  // namespace wick::kernels
