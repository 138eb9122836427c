#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace {

// GEMV (T = 1): blocks of output rows; each block streams its rows once, several at a time.
constexpr int64_t kGemvBlockRows = 64;
// Below this many weights a GEMV runs on the calling thread (waking a worker costs ~1-2 us).
constexpr int64_t kGemvParallelWeights = 1 << 15;

// GEMM (T > 1): work items are blocks of output rows x spans of inputs. An item's rows (at most
// kGemmBlockBytes as fp32) stay in L2 while every tile of inputs (in L1) passes over them; spans
// of inputs are long (whole prompts when there are enough row blocks), so each weight is read
// from memory about once per call.
constexpr int64_t kGemmBlockBytes = 192 * 1024;
// Items per thread to aim for, so a thread the OS descheduled costs little (thread_pool.h).
constexpr int64_t kGemmItemsPerThread = 4;
// Shortest span of inputs an item is split down to.
constexpr int64_t kGemmMinInputs = 32;
// matmul_decoded GEMV: rows decoded at once, at most kDecodeRows and about kDecodeBytes of fp32.
constexpr int64_t kDecodeRows = 8;
constexpr int64_t kDecodeBytes = 32 * 1024;
// matmul_bf16_inputs: elements of X one block of the bf16 conversion takes.
constexpr int64_t kBitsBlock = 16384;

const void* row_ptr(const MatrixRef& w, int64_t row) {
  return static_cast<const uint8_t*>(w.data) +
         row * w.cols * static_cast<int64_t>(dtype_size(w.dtype));
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
      WICK_CHECK(false, "matmul() accepts F32/F16/BF16 matrices only");
  }
}

// The tiles of one GEMM work item, rows [r0, r1) x inputs [t0, t1): fn(r, nr, t, nt) for each
// tile of nr <= tile_rows rows and nt <= tile_inputs inputs, inputs outermost (a tile of inputs
// stays in L1 while it passes over the item's rows).
template <typename Fn>
void for_each_tile(int64_t tile_rows, int64_t tile_inputs, int64_t r0, int64_t r1, int64_t t0,
                   int64_t t1, Fn&& fn) {
  for (int64_t t = t0; t < t1; t += tile_inputs) {
    const int nt = static_cast<int>(std::min(tile_inputs, t1 - t));
    for (int64_t r = r0; r < r1; r += tile_rows)
      fn(r, static_cast<int>(std::min(tile_rows, r1 - r)), t, nt);
  }
}

// The tiles of one GEMM work item over fp32 rows [r0, r1) held contiguously at `rows` (an L2
// block).
void gemm_tiles_f32(const DotKernels& k, const float* rows, int64_t cols, int64_t ys,
                    const float* x, float* y, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const size_t n = static_cast<size_t>(cols);
  for_each_tile(k.tile_rows, k.tile_inputs, r0, r1, t0, t1,
                [&](int64_t r, int nr, int64_t t, int nt) {
                  k.gemm_tile(rows + (r - r0) * cols, n, x + t * cols, n, n, nr, nt, y + t * ys + r,
                              static_cast<size_t>(ys));
                });
}

void gemm_item(const DotKernels& k, const MatrixRef& w, const float* x, float* y, int64_t r0,
               int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
  const size_t n = static_cast<size_t>(w.cols);
  // fp16 / bf16 rows are read in place by the 16-bit tile (each weight widened as it is loaded):
  // measured as fast as widening the block into fp32 first at 512 inputs and 10-25 % faster at
  // 16 (the engine's batched decode), with no fp32 copy to write and read back. fp32 rows are
  // copied into a 64-byte aligned block contiguous in L2, which measured faster than reading them
  // in place from the mapped file.
  if (w.dtype == DType::F32) {
    float* block = arena.get<float>(static_cast<size_t>(r1 - r0) * n, Arena::kBlock0);
    std::memcpy(block, row_ptr(w, r0), static_cast<size_t>(r1 - r0) * n * sizeof(float));
    return gemm_tiles_f32(k, block, w.cols, w.rows, x, y, r0, r1, t0, t1);
  }
  const GemmTileU16 tile16 = w.dtype == DType::F16 ? k.gemm_tile_f16 : k.gemm_tile_bf16;
  for_each_tile(k.tile_rows, k.tile_inputs, r0, r1, t0, t1,
                [&](int64_t r, int nr, int64_t t, int nt) {
                  tile16(static_cast<const uint16_t*>(row_ptr(w, r)), n, x + t * n, n, n, nr, nt,
                         y + t * w.rows + r, static_cast<size_t>(w.rows));
                });
}

// The blocks of a GEMV of `rows` outputs, run on the pool (or the caller when small):
// fn(r0, r1, arena) with the running thread's arena.
template <typename Fn>
void for_each_gemv_block(const MatrixRef& w, ThreadPool& pool, Fn&& fn) {
  const int64_t blocks = (w.rows + kGemvBlockRows - 1) / kGemvBlockRows;
  auto block = [&](int64_t b, Arena& arena) {
    const int64_t r0 = b * kGemvBlockRows;
    fn(r0, std::min(w.rows, r0 + kGemvBlockRows), arena);
  };
  if (w.rows * w.cols < kGemvParallelWeights) {
    for (int64_t b = 0; b < blocks; ++b) block(b, pool.caller_arena());
  } else {
    parallel_for(pool, blocks, block);
  }
}

// The work items of a GEMM of T inputs, run on the pool (or the caller when small):
// fn(r0, r1, t0, t1, arena) for blocks of rows (a multiple of tile_rows, each block's weights at
// most kGemmBlockBytes when held as `block_elem_bytes` per element) x spans of inputs.
template <typename Fn>
void for_each_gemm_item(const MatrixRef& w, int64_t T, int64_t tile_rows, int64_t block_elem_bytes,
                        ThreadPool& pool, Fn&& fn) {
  // Row blocks: as many rows as fit the L2 budget, but enough blocks for every thread.
  const int64_t tr = tile_rows;
  const int64_t threads = pool.threads();
  const int64_t fit_rows =
      std::max<int64_t>(1, kGemmBlockBytes / (w.cols * block_elem_bytes) / tr) * tr;
  const int64_t want_blocks = kGemmItemsPerThread * threads;
  const int64_t even_rows = ((w.rows + want_blocks - 1) / want_blocks + tr - 1) / tr * tr;
  const int64_t block_rows = std::max(tr, std::min(fit_rows, even_rows));
  const int64_t row_blocks = (w.rows + block_rows - 1) / block_rows;
  // Spans of inputs: one (all T) unless there are too few row blocks to share out.
  const int64_t want_spans = std::max<int64_t>(1, (want_blocks + row_blocks - 1) / row_blocks);
  const int64_t spans = std::max<int64_t>(1, std::min(want_spans, T / kGemmMinInputs));
  const int64_t span = (T + spans - 1) / spans;
  const int64_t input_blocks = (T + span - 1) / span;
  auto item = [&](int64_t i, Arena& arena) {
    const int64_t rb = i % row_blocks, tb = i / row_blocks;
    const int64_t r0 = rb * block_rows, t0 = tb * span;
    fn(r0, std::min(w.rows, r0 + block_rows), t0, std::min(T, t0 + span), arena);
  };
  if (w.rows * w.cols * T < kGemvParallelWeights) {
    for (int64_t i = 0; i < row_blocks * input_blocks; ++i) item(i, pool.caller_arena());
  } else {
    parallel_for(pool, row_blocks * input_blocks, item);
  }
}

}  // namespace

void matmul(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  WICK_CHECK(w.dtype == DType::F32 || w.dtype == DType::F16 || w.dtype == DType::BF16,
             "the loader only builds F32/F16/BF16 matrices");
  const DotKernels& k = dot_kernels();
  if (T == 1) {
    for_each_gemv_block(w, pool,
                        [&](int64_t r0, int64_t r1, Arena&) { gemv_block(k, w, x, r0, r1, y); });
    return;
  }
  for_each_gemm_item(w, T, k.tile_rows, sizeof(float), pool,
                     [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
                       gemm_item(k, w, x, y, r0, r1, t0, t1, arena);
                     });
}

void matmul_bf16_inputs(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const Bf16DotKernels* k = bf16_dot_kernels();
  if (k == nullptr || w.dtype != DType::BF16) return matmul(w, x, T, y, pool);
  // The rows as bf16 bit patterns: x is already rounded to bf16, so this drops only zero bits.
  const size_t n = static_cast<size_t>(w.cols);
  const int64_t count = T * w.cols;
  // xb stays in use across the pool jobs below: safe because only a pool's caller asks for the
  // kCaller slots, so the levelling before each job never grows (reallocates) the caller's own.
  uint16_t* xb = pool.caller_arena().get<uint16_t>(static_cast<size_t>(count), Arena::kCaller0);
  auto to_bits = [&](int64_t b) {
    const int64_t i0 = b * kBitsBlock, i1 = std::min(count, (b + 1) * kBitsBlock);
    k->pack(x + i0, xb + i0, static_cast<size_t>(i1 - i0));
  };
  const int64_t bit_blocks = (count + kBitsBlock - 1) / kBitsBlock;
  if (bit_blocks == 1) {
    to_bits(0);
  } else {
    parallel_for(pool, bit_blocks, to_bits);
  }
  const auto* wb = static_cast<const uint16_t*>(w.data);
  if (T == 1) {
    for_each_gemv_block(w, pool, [&](int64_t r0, int64_t r1, Arena&) {
      k->gemv(wb + r0 * w.cols, n, xb, n, static_cast<int>(r1 - r0), y + r0);
    });
    return;
  }
  // The weights are read in place (no widening); a block of rows stays in L2 while every tile of
  // inputs passes over it.
  for_each_gemm_item(w, T, k->tile_rows, sizeof(uint16_t), pool,
                     [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena&) {
                       for_each_tile(k->tile_rows, k->tile_inputs, r0, r1, t0, t1,
                                     [&](int64_t r, int nr, int64_t t, int nt) {
                                       k->gemm_tile(wb + r * w.cols, n, xb + t * w.cols, n, n, nr,
                                                    nt, y + t * w.rows + r,
                                                    static_cast<size_t>(w.rows));
                                     });
                     });
}

void matmul_decoded(const DecodedMatrix& w, const float* x, int64_t T, float* y,
                    const DotKernels& k, ThreadPool& pool) {
  WICK_CHECK(w.decode != nullptr && w.rows >= 0 && w.cols > 0 && T >= 1,
             "a decoded matrix has a decoder and a shape");
  if (w.rows == 0) return;
  const MatrixRef shape{nullptr, DType::F32, w.rows, w.cols};
  const size_t n = static_cast<size_t>(w.cols);
  if (T == 1) {
    // Each block of rows is decoded a few rows at a time into an L1-sized piece (at least one
    // row, at most kDecodeRows), which the GEMV then sums while it is still in cache.
    const int64_t sub =
        std::clamp<int64_t>(kDecodeBytes / (w.cols * int64_t{sizeof(float)}), 1, kDecodeRows);
    for_each_gemv_block(shape, pool, [&](int64_t r0, int64_t r1, Arena& arena) {
      if (w.gemv != nullptr) return w.gemv(w.ctx, r0, r1, x, y + r0);
      float* rows = arena.get<float>(static_cast<size_t>(sub) * n, Arena::kBlock0);
      for (int64_t r = r0; r < r1; r += sub) {
        const int64_t nr = std::min(sub, r1 - r);
        w.decode(w.ctx, r, r + nr, rows);
        k.gemv_f32(rows, n, x, n, static_cast<int>(nr), y + r);
      }
    });
    return;
  }
  for_each_gemm_item(shape, T, k.tile_rows, sizeof(float), pool,
                     [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
                       float* rows =
                           arena.get<float>(static_cast<size_t>(r1 - r0) * n, Arena::kBlock0);
                       w.decode(w.ctx, r0, r1, rows);
                       gemm_tiles_f32(k, rows, w.cols, w.rows, x, y, r0, r1, t0, t1);
                     });
}

}  // namespace wick::kernels
