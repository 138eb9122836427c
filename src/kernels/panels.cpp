#include "kernels/panels.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/thread_pool.h"
#include "kernels/work_items.h"

namespace wick::kernels {
namespace {

constexpr size_t kP = static_cast<size_t>(kPanelRows);

void check_matrix(DType dtype, int64_t rows, int64_t cols) {
  WICK_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
             "panels hold F32/F16/BF16 matrices only");
  WICK_CHECK(rows >= 1 && cols >= 1, "a packed matrix has rows and columns");
}

// Panel p's rows of the row-major w, transposed into dst (its 16 x cols elements), zero-padded.
template <class W>
void pack_panel(const W* src, int64_t rows, size_t cols, int64_t p, W* dst) {
  const int64_t r0 = p * kPanelRows;
  const int64_t n = std::min<int64_t>(kPanelRows, rows - r0);
  if (n < kPanelRows) std::fill_n(dst, kP * cols, W{});
  for (int64_t i = 0; i < n; ++i) {
    const W* row = src + static_cast<size_t>(r0 + i) * cols;
    for (size_t k = 0; k < cols; ++k) dst[k * kP + static_cast<size_t>(i)] = row[k];
  }
}

// The bytes of panel p's elements from column k0 on.
const uint8_t* panel_at(const PanelMatrix& w, int64_t p, int64_t k0) {
  const int64_t es = static_cast<int64_t>(dtype_size(w.dtype));
  return static_cast<const uint8_t*>(w.data) + (p * kPanelRows * w.cols + k0 * kPanelRows) * es;
}

void gemv_panels(const DotKernels& k, const PanelMatrix& w, const float* x, int64_t r0, int64_t r1,
                 float* y) {
  const size_t cols = static_cast<size_t>(w.cols);
  const void* p = panel_at(w, r0 / kPanelRows, 0);
  switch (w.dtype) {
    case DType::F32:
      return k.panel_gemv_f32(static_cast<const float*>(p), cols, x, r1 - r0, y + r0);
    case DType::F16:
      return k.panel_gemv_f16(static_cast<const uint16_t*>(p), cols, x, r1 - r0, y + r0);
    default:
      return k.panel_gemv_bf16(static_cast<const uint16_t*>(p), cols, x, r1 - r0, y + r0);
  }
}

// One GEMM work item: rows [r0, r1) (r0 a multiple of 16) x inputs [t0, t1), every block of
// columns in order, one tile of inputs at a time over the item's panels.
void gemm_item(const DotKernels& k, const PanelMatrix& w, const float* x, float* y, int64_t r0,
               int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
  const size_t cols = static_cast<size_t>(w.cols), ys = static_cast<size_t>(w.rows);
  const int64_t p0 = r0 / kPanelRows, p1 = panel_count(r1);
  const bool widen = w.dtype != DType::F32 && t1 - t0 >= kPanelWidenMinInputs;
  for (int64_t k0 = 0; k0 < w.cols; k0 += kPanelColumnBlock) {
    const size_t nk = static_cast<size_t>(std::min(kPanelColumnBlock, w.cols - k0));
    const bool accumulate = k0 > 0;
    const void* wb = panel_at(w, p0, k0);
    size_t ps = kP * cols;
    if (widen) {  // the item's panels' block of columns as fp32, panel stride 16 nk
      float* block = arena.get<float>(static_cast<size_t>(p1 - p0) * kP * nk, Arena::kBlock0);
      const auto widen16 = w.dtype == DType::F16 ? k.widen_f16 : k.widen_bf16;
      for (int64_t p = p0; p < p1; ++p)
        widen16(reinterpret_cast<const uint16_t*>(panel_at(w, p, k0)),
                block + static_cast<size_t>(p - p0) * kP * nk, kP * nk);
      wb = block;
      ps = kP * nk;
    }
    const DType held = widen ? DType::F32 : w.dtype;
    for (int64_t t = t0; t < t1; t += k.panel_tile_inputs) {
      const int nt = static_cast<int>(std::min<int64_t>(k.panel_tile_inputs, t1 - t));
      const float* xt = x + static_cast<size_t>(t) * cols + static_cast<size_t>(k0);
      float* yt = y + static_cast<size_t>(t) * ys + static_cast<size_t>(r0);
      if (held == DType::F32)
        k.panel_tile_f32(static_cast<const float*>(wb), ps, xt, cols, nk, r1 - r0, nt, yt, ys,
                         accumulate);
      else
        (held == DType::F16 ? k.panel_tile_f16 : k.panel_tile_bf16)(
            static_cast<const uint16_t*>(wb), ps, xt, cols, nk, r1 - r0, nt, yt, ys, accumulate);
    }
  }
}

}  // namespace

int64_t panel_count(int64_t rows) {
  return (rows + kPanelRows - 1) / kPanelRows;
}

size_t panel_bytes(int64_t rows, int64_t cols, DType dtype) {
  WICK_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
             "panels hold F32/F16/BF16 matrices only");
  WICK_CHECK(rows >= 0 && cols >= 0, "a matrix size is not negative");
  return static_cast<size_t>(panel_count(rows) * kPanelRows * cols) * dtype_size(dtype);
}

PanelMatrix pack_panels(const MatrixRef& w, void* dst, ThreadPool& pool) {
  check_matrix(w.dtype, w.rows, w.cols);
  const size_t cols = static_cast<size_t>(w.cols);
  parallel_for(pool, panel_count(w.rows), w.rows * w.cols, [&](int64_t p, Arena&) {
    const size_t at = static_cast<size_t>(p) * kP * cols;
    if (w.dtype == DType::F32)
      pack_panel(static_cast<const float*>(w.data), w.rows, cols, p, static_cast<float*>(dst) + at);
    else
      pack_panel(static_cast<const uint16_t*>(w.data), w.rows, cols, p,
                 static_cast<uint16_t*>(dst) + at);
  });
  return {dst, w.dtype, w.rows, w.cols};
}

void matmul_panels(const PanelMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  matmul_panels(w, x, T, y, dot_kernels(), pool);
}

void matmul_panels(const PanelMatrix& w, const float* x, int64_t T, float* y, const DotKernels& k,
                   ThreadPool& pool) {
  check_matrix(w.dtype, w.rows, w.cols);
  WICK_CHECK(T >= 1, "a matrix product has at least one input row");
  const int threads = pool.threads();
  if (T == 1) {
    // Blocks of whole panels: two per thread at least, at most kGemvBlockRows rows each.
    const int64_t np = panel_count(w.rows);
    const int64_t per = std::clamp<int64_t>((np + 2 * threads - 1) / (2 * threads), 1,
                                            work::kGemvBlockRows / kPanelRows);
    const int64_t blocks = (np + per - 1) / per;
    parallel_for(pool, blocks, w.rows * w.cols, [&](int64_t b, Arena&) {
      const int64_t r0 = b * per * kPanelRows, r1 = std::min(w.rows, (b + 1) * per * kPanelRows);
      gemv_panels(k, w, x, r0, r1, y);
    });
    return;
  }
  // Items' rows: whole tiles (so whole panels), as many as keep a block of columns of them, as
  // held in fp32, within the L2 budget of work::gemm_items.
  const int64_t tile_rows = std::max<int64_t>(kPanelRows, k.panel_tile_rows);
  const int64_t held_row_bytes =
      std::min(kPanelColumnBlock, w.cols) * static_cast<int64_t>(sizeof(float));
  work::for_each_gemm_item(w.rows, w.cols, T, tile_rows, held_row_bytes, pool,
                           [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
                             gemm_item(k, w, x, y, r0, r1, t0, t1, arena);
                           });
}

}  // namespace wick::kernels
