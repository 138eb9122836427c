// Quantised matrix products (kernels/qmatmul.h): instruction-set dispatch, the per-call input
// preparation (reordered inputs and per-block sums, computed once per call into per-thread
// scratch) and the split of the work over the kernel thread pool. The arithmetic lives in
// qmatmul_{scalar,avx2,avx512}.cpp.
#include "kernels/qmatmul.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/kernel_table.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace qmat {
namespace {

// GEMV (T = 1): items of this many output rows (a row kernel streams them as two interleaved
// halves). Small enough to spread the 768-row matrices of the smallest models over many threads,
// large enough that claiming an item (one atomic) is negligible next to reading its ~10-30 KB of
// codes.
constexpr int64_t kGemvRows = 32;
// GEMM (T > 1): items of rows x inputs. Each tile of inputs (L1) is swept by the item's rows,
// whose codes (L1/L2) are decoded once per tile.
constexpr int64_t kGemmRows = 32;
constexpr int64_t kGemmInputs = 32;
// Below this many weight x input products a call runs on the calling thread (waking a worker
// costs ~1-2 us).
constexpr int64_t kParallelWork = 1 << 15;

// Preconditions of the header (cols a positive multiple of 256, the buffers a layout needs).
// Violations are programming errors of the caller: the loader validates files before building
// these views.
bool valid(const Sb6Matrix& w) {
  if (w.rows < 0 || w.cols <= 0 || w.cols % 256 != 0) return false;
  if (w.bits < 4 || w.bits > 6) return false;
  if (!w.codes_packed || !w.qsqm || !w.d || !w.dm) return false;
  return (w.bits < 5 || w.qh) && (w.bits < 6 || w.qh2);
}
bool valid(const SymMatrix& w) {
  if (w.rows < 0 || w.cols <= 0 || w.cols % 256 != 0 || !w.qs || !w.d) return false;
  if (w.bits == 8) return w.codes != nullptr;
  return w.bits == 6 && w.codes_packed && w.qh && w.qh2;
}

// prepare_fn(px, xbsum) -> inputs; rows_fn(r0, r1, inputs, xbsum, nt, y, y_stride): the ISA's
// kernels for this matrix.
template <class M, class PrepareFn, class RowsFn>
void run(const M& w, const float* x, int64_t T, float* y, ThreadPool& pool, PrepareFn prepare_fn,
         RowsFn rows_fn) {
  WICK_CHECK(valid(w) && T >= 1, "PackedLinear builds valid packed views");
  if (w.rows == 0) return;
  const int64_t cols = w.cols, ng = cols / kGroup;
  // The caller's arena: grown, never shrunk, so no allocation once the largest shape was seen.
  Arena& arena = pool.caller_arena();
  float* xbsum_buf = arena.get<float>(static_cast<size_t>(T * ng), Arena::kCaller0);
  float* px_buf = arena.get<float>(static_cast<size_t>(T * cols), Arena::kCaller1);
  const float* xbsum = xbsum_buf;
  const float* px = prepare_fn(px_buf, xbsum_buf);

  const bool serial = w.rows * cols * T < kParallelWork;
  if (T == 1) {
    const int64_t blocks = (w.rows + kGemvRows - 1) / kGemvRows;
    auto block = [&](int64_t b) {
      const int64_t r0 = b * kGemvRows, r1 = std::min(w.rows, r0 + kGemvRows);
      rows_fn(r0, r1, px, xbsum, 1, y + r0, w.rows);
    };
    if (serial) {
      for (int64_t b = 0; b < blocks; ++b) block(b);
    } else {
      parallel_for(pool, blocks, block);
    }
    return;
  }
  const int64_t row_blocks = (w.rows + kGemmRows - 1) / kGemmRows;
  const int64_t input_blocks = (T + kGemmInputs - 1) / kGemmInputs;
  auto item = [&](int64_t i) {
    const int64_t rb = i % row_blocks, tb = i / row_blocks;
    const int64_t r0 = rb * kGemmRows, r1 = std::min(w.rows, r0 + kGemmRows);
    const int64_t t0 = tb * kGemmInputs, t1 = std::min(T, t0 + kGemmInputs);
    rows_fn(r0, r1, px + t0 * cols, xbsum + t0 * ng, t1 - t0, y + t0 * w.rows + r0, w.rows);
  };
  if (serial) {
    for (int64_t i = 0; i < row_blocks * input_blocks; ++i) item(i);
  } else {
    parallel_for(pool, row_blocks * input_blocks, item);
  }
}

}  // namespace

const Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return kernels_avx512();
    case Isa::kAvx2:
      return kernels_avx2();
    case Isa::kScalar:
      break;
  }
  return kernels_scalar();
}

static void qmatmul_with(const Kernels& k, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                         ThreadPool& pool) {
  run(
      w, x, T, y, pool, [&](float* px, float* xbsum) { return k.prepare_sb6(w, x, T, px, xbsum); },
      [&](int64_t r0, int64_t r1, const float* px, const float* xbsum, int64_t nt, float* out,
          int64_t ys) { k.sb6(w, r0, r1, px, xbsum, nt, out, ys); });
}

static void qmatmul_with(const Kernels& k, const SymMatrix& w, const float* x, int64_t T, float* y,
                         ThreadPool& pool) {
  run(
      w, x, T, y, pool, [&](float* px, float*) { return k.prepare_sym(w, x, T, px); },
      [&](int64_t r0, int64_t r1, const float* px, const float*, int64_t nt, float* out,
          int64_t ys) { k.sym(w, r0, r1, px, nt, out, ys); });
}

void qmatmul_isa(Isa isa, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  qmatmul_with(kernels_for(isa), w, x, T, y, pool);
}

void qmatmul_isa(Isa isa, const SymMatrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  qmatmul_with(kernels_for(isa), w, x, T, y, pool);
}

}  // namespace qmat

void qmatmul(const Sb6Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  qmat::qmatmul_with(kernel_table().packed, w, x, T, y, pool);
}

void qmatmul(const SymMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  qmat::qmatmul_with(kernel_table().packed, w, x, T, y, pool);
}

}  // namespace wick::kernels
