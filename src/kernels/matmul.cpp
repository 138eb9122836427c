#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/panels.h"
#include "kernels/thread_pool.h"
#include "kernels/work_items.h"

namespace wick::kernels {
namespace {

using work::for_each_gemm_item;
using work::for_each_gemv_block;
using work::GemmItems;
using work::GemvBlocks;

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

// The prefetch target of a tile of nr rows ending at `end` in an item whose rows end at r1 (dot.h
// GemmTile `next`, which covers nr rows from there): the item's following rows while the item's
// first tile of inputs passes over them (their first read, from memory), when nr of them follow;
// else none (the item's last, shorter group goes without). Never past the item, so never past the
// matrix: the next item may run on the other thread.
const void* first_pass_next(const MatrixRef& w, int64_t end, int nr, int64_t r1,
                            bool first_inputs) {
  return first_inputs && r1 - end >= nr ? row_ptr(w, end) : nullptr;
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
                              static_cast<size_t>(ys), nullptr);
                });
}

void gemm_item(const DotKernels& k, const MatrixRef& w, const float* x, float* y, int64_t r0,
               int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
  const size_t n = static_cast<size_t>(w.cols);
  const size_t count = static_cast<size_t>(r1 - r0) * n;
  // fp32 rows are copied into a 64-byte aligned block contiguous in L2, which measured faster than
  // reading them in place from the mapped file; fp16 / bf16 rows are widened into such a block
  // where work::widen_rows_first() says so (exact: the same bits as the 16-bit tile), else read in
  // place by the 16-bit tile.
  if (w.dtype == DType::F32 || work::widen_rows_first(t1 - t0, w.cols, k.tile_inputs)) {
    float* block = arena.get<float>(count, Arena::kBlock0);
    if (w.dtype == DType::F32)
      std::memcpy(block, row_ptr(w, r0), count * sizeof(float));
    else
      (w.dtype == DType::F16 ? k.widen_f16 : k.widen_bf16)(
          static_cast<const uint16_t*>(row_ptr(w, r0)), block, count);
    return gemm_tiles_f32(k, block, w.cols, w.rows, x, y, r0, r1, t0, t1);
  }
  const GemmTileU16 tile16 = w.dtype == DType::F16 ? k.gemm_tile_f16 : k.gemm_tile_bf16;
  for_each_tile(k.tile_rows, k.tile_inputs, r0, r1, t0, t1,
                [&](int64_t r, int nr, int64_t t, int nt) {
                  tile16(static_cast<const uint16_t*>(row_ptr(w, r)), n, x + t * n, n, n, nr, nt,
                         y + t * w.rows + r, static_cast<size_t>(w.rows),
                         first_pass_next(w, r + nr, nr, r1, t == t0));
                });
}

void matmul_all_with(const DotKernels& k, std::span<const MatmulCall> calls, int64_t T,
                     ThreadPool& pool);

// Where decoded_lane_major_gemm runs (elsewhere the row-major tile): rows of 2048 columns or more
// (the row-major tile's long rows, dot_impl.h kLongRow, whose steps all read from L2), 64 inputs
// or more (fewer do not pay for the packing) and 256 rows or more. Intel Emerald Rapids, 2
// threads, `build/bench/bench_qmatmul --benchmark_filter=long_rows --benchmark_repetitions=5`,
// fastest of 5, two alternating rounds of a temporary build that forced either path,
// row-major -> lane-major ms: 768 x 3072 T 32 1.07-1.11 -> 1.04-1.15,
// T 64 2.03 -> 1.78-1.98, T 128 3.99-4.04 -> 3.09-3.35, T 256 7.22-8.07 -> 5.71 (one round;
// 8.67 in the other); 2048 x 8192 T 32 7.80-8.16 -> 7.40-10.2, T 64 13.8-15.8 -> 11.8-13.9, T 128
// 26.6-27.7 -> 21.6-24.0, T 256 50.3-53.1 -> 38.8-44.3. Over 768 columns the row-major tile (its
// inputs in L1) was faster at every T (3072 x 768, T 128: 2.68-2.76 against 3.46-3.51). With few
// rows, reordering the inputs costs as much as the products it feeds (a LoRA factor of 64 rows).
constexpr int64_t kLaneMajorMinCols = 2048;
constexpr int64_t kLaneMajorMinInputs = 64;
constexpr int64_t kLaneMajorMinRows = 256;
// Columns decoded at once for the lane-major packing (16 rows of them: 16 KiB, in L1 when packed,
// where whole rows of 8192 columns, 512 KiB, came back from L2). Intel Emerald Rapids, 2 threads,
// `build/bench/bench_qmatmul --benchmark_filter='long_rows/rows:(768|2048)/.*T:(128|256)'
// --benchmark_repetitions=5`, fastest of 5, three alternating rounds, whole rows -> blocks of 256:
// 2048 x 8192 T 128 17.5-18.0 -> 17.3-17.4 ms (3 of 3 faster), T 256 32.1-34.3 -> 32.4-36.2,
// 768 x 3072 T 128 2.40-2.92 -> 2.42-2.49 (level).
constexpr int64_t kDecodeColumns = 256;

// matmul_decoded's GEMM as lane-major panels (panels.h lane_major_chunks), on an ISA with
// reduce_lanes. The inputs are put in lane-major order once (xl, the caller arena's kCaller0).
// Each work item decodes its rows a panel (16 rows) and a block of kDecodeColumns columns at a
// time, row by row, into a scratch block (kBlock1, so the packing reads them from L1) and packs
// them lane-major into its block (kBlock0); then for each tile of inputs and tile of rows the panel
// tile runs over each lane's columns into lane sums (kBlock1 again) and reduce_lanes adds them into
// y. The bits are the row-major tile's (each lane's chain and the tree are the dot's); the speed is
// the panel tile's, whose steps load one vector of 16 rows' weights and broadcast one input element
// from L1, where the row-major tile over long rows loads a vector from each of its 4 rows and 6
// inputs, all from L2.
void decoded_lane_major_gemm(const DecodedMatrix& w, const float* x, int64_t T, float* y,
                             const DotKernels& k, ThreadPool& pool) {
  const int64_t lanes = k.lanes, cols = w.cols;
  const int64_t chunks = lane_major_chunks(cols, k.lanes);
  const int64_t stride = lane_major_stride(cols, k.lanes), ls = lanes * stride;
  // xl[t * ls + j * stride + c] = x[t * cols + c * lanes + j] (0 past cols): the panels' order.
  float* xl = pool.caller_arena().get<float>(static_cast<size_t>(T * ls), Arena::kCaller0);
  parallel_for(pool, T, T * ls, [&](int64_t t, Arena&) {
    lane_major_inputs(x + t * cols, static_cast<size_t>(cols), k.lanes, xl + t * ls);
  });
  const int64_t ps = kPanelRows * ls;  // a panel's floats
  const int64_t nt_max = k.panel_tile_inputs;
  // Rows are decoded a block of columns at a time (about kDecodeColumns, whole decode blocks, a
  // multiple of the lanes; else whole rows), the panel's 16 rows of it then in L1 for the packing.
  int64_t cb = std::max<int64_t>(1, kDecodeColumns / w.col_block) * w.col_block;
  if (cb % lanes != 0 || cb >= cols) cb = cols;
  // Decoded rows lie a line more than a row apart (not a power of two: see lane_major_stride).
  const int64_t row_stride = cb + 16;
  for_each_gemm_item(
      w.rows, ls, T, k.panel_tile_rows, ls * int64_t{sizeof(float)}, pool,
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
        const int64_t nr = r1 - r0, panels = panel_count(nr);
        float* block = arena.get<float>(static_cast<size_t>(panels * ps), Arena::kBlock0);
        float* rows =
            arena.get<float>(static_cast<size_t>(kPanelRows * row_stride), Arena::kBlock1);
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t first = r0 + p * kPanelRows, pr = std::min(kPanelRows, r1 - first);
          for (int64_t c0 = 0; c0 < cols; c0 += cb) {
            const int64_t c1 = std::min(cols, c0 + cb);
            for (int64_t i = 0; i < pr; ++i)
              w.decode(w.ctx, first + i, first + i + 1, c0, c1, rows + i * row_stride);
            pack_lane_major_panel(rows, static_cast<size_t>(row_stride), pr,
                                  static_cast<size_t>(cols), k.lanes, block + p * ps,
                                  k.transpose_lanes, static_cast<size_t>(c0),
                                  static_cast<size_t>(c1));
          }
        }
        // For each tile of inputs, tile of rows by tile of rows (its lane sums then stay in L1):
        // lane_sums[(j * nt_max + u) * mr_max + r] is lane j's sum of row q + r and input t + u.
        const int64_t mr_max = k.panel_tile_rows;
        float* lane_sums =
            arena.get<float>(static_cast<size_t>(lanes * nt_max * mr_max), Arena::kBlock1);
        for (int64_t t = t0; t < t1; t += nt_max) {
          const int nt = static_cast<int>(std::min(nt_max, t1 - t));
          for (int64_t q = r0; q < r1; q += mr_max) {
            const int64_t mr = std::min(mr_max, r1 - q);
            const float* wq = block + (q - r0) / kPanelRows * ps;
            for (int64_t j = 0; j < lanes; ++j)
              k.panel_tile_f32(wq + j * stride * kPanelRows, static_cast<size_t>(ps),
                               xl + t * ls + j * stride, static_cast<size_t>(ls),
                               static_cast<size_t>(chunks), mr, nt, lane_sums + j * nt_max * mr_max,
                               static_cast<size_t>(mr_max), false);
            for (int u = 0; u < nt; ++u)
              k.reduce_lanes(lane_sums + u * mr_max, static_cast<size_t>(nt_max * mr_max),
                             static_cast<size_t>(mr), y + (t + u) * w.rows + q);
          }
        }
      },
      work::row_gemm_block_bytes());
}

}  // namespace

void check_dense_matrix(const MatrixRef& w) {
  WICK_CHECK(dense_dtype(w.dtype), "a dense matrix holds F32/F16/BF16 elements");
  WICK_CHECK(w.rows >= 1 && w.cols >= 1, "a dense matrix has rows and columns");
}

void matmul(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  matmul_with(dot_kernels(), w, x, T, y, pool);
}

void matmul_with(const DotKernels& set, const MatrixRef& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  const MatmulCall call{w, x, y};
  matmul_all_with(set, std::span<const MatmulCall>(&call, 1), T, pool);
}

namespace {

// The products' work in one pool job: each product split as `plan(w)` splits it (what matmul()
// alone does), `step(call, blocks, j, arena)` running its block j. Only the first calls.size()
// entries of the plans are filled; none is initialised before (this runs once per product call).
template <typename Plan, typename Step>
void share_out(std::span<const MatmulCall> calls, ThreadPool& pool, int64_t T, Plan plan,
               Step step) {
  using Blocks = decltype(plan(calls[0].w));
  std::array<Blocks, kMaxMatmulCalls> blocks;
  // The first block of the job that is product i's: first[i] <= b < first[i + 1].
  std::array<int64_t, kMaxMatmulCalls + 1> first;
  first[0] = 0;
  int64_t work_total = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const MatrixRef& w = calls[i].w;
    check_dense_matrix(w);
    blocks[i] = plan(w);
    first[i + 1] = first[i] + blocks[i].count;
    work_total += w.rows * w.cols * T;
  }
  parallel_for(pool, first[calls.size()], work_total, [&](int64_t b, Arena& arena) {
    size_t i = 0;
    while (b >= first[i + 1]) ++i;
    step(calls[i], blocks[i], b - first[i], arena);
  });
}

// matmul_all with the kernel set k; each matrix split and run as its layout asks.
void matmul_all_with(const DotKernels& k, std::span<const MatmulCall> calls, int64_t T,
                     ThreadPool& pool) {
  WICK_CHECK(calls.size() <= kMaxMatmulCalls, "matmul_all takes at most kMaxMatmulCalls products");
  WICK_CHECK(T >= 1, "a matrix product has at least one input row");
  if (calls.empty()) return;
  const int threads = pool.threads();
  const auto panels = [](const MatrixRef& w) { return w.layout == MatrixLayout::kPanels; };
  if (T == 1) {
    share_out(
        calls, pool, T,
        [&](const MatrixRef& w) {
          return work::gemv_blocks(w.rows, threads, panels(w) ? kPanelRows : work::kGemvMinRows);
        },
        [&](const MatmulCall& c, const GemvBlocks& g, int64_t j, Arena&) {
          if (panels(c.w)) return panel_gemv_block(k, c.w, c.x, g.r0(j), g.r1(j), c.y);
          gemv_block(k, c.w, c.x, g.r0(j), g.r1(j), c.y);
        });
    return;
  }
  share_out(
      calls, pool, T,
      [&](const MatrixRef& w) {
        if (panels(w)) return panel_gemm_items(k, w, T, threads);
        return work::gemm_items(w.rows, T, k.tile_rows, w.cols * int64_t{sizeof(float)}, threads);
      },
      [&](const MatmulCall& c, const GemmItems& g, int64_t j, Arena& arena) {
        const GemmItems::Item it = g.item(j);
        if (panels(c.w)) return panel_gemm_item(k, c.w, c.x, c.y, it, arena);
        gemm_item(k, c.w, c.x, c.y, it.r0, it.r1, it.t0, it.t1, arena);
      });
}

}  // namespace

void matmul_all(std::span<const MatmulCall> calls, int64_t T, ThreadPool& pool) {
  matmul_all_with(dot_kernels(), calls, T, pool);
}

void matmul_bf16_inputs(const MatrixRef& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const Bf16DotKernels* k = bf16_dot_kernels();
  if (k == nullptr || w.dtype != DType::BF16 || w.layout != MatrixLayout::kRows)
    return matmul(w, x, T, y, pool);
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
  parallel_for(pool, bit_blocks, to_bits);
  const auto* wb = static_cast<const uint16_t*>(w.data);
  if (T == 1) {
    for_each_gemv_block(w.rows, w.cols, 1, pool, [&](int64_t r0, int64_t r1, Arena&) {
      k->gemv(wb + r0 * w.cols, n, xb, n, static_cast<int>(r1 - r0), y + r0);
    });
    return;
  }
  // The weights are read in place (no widening); a block of rows stays in L2 while every tile of
  // inputs passes over it.
  for_each_gemm_item(w.rows, w.cols, T, k->tile_rows, w.cols * int64_t{sizeof(uint16_t)}, pool,
                     [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena&) {
                       for_each_tile(k->tile_rows, k->tile_inputs, r0, r1, t0, t1,
                                     [&](int64_t r, int nr, int64_t t, int nt) {
                                       k->gemm_tile(wb + r * w.cols, n, xb + t * w.cols, n, n, nr,
                                                    nt, y + t * w.rows + r,
                                                    static_cast<size_t>(w.rows),
                                                    first_pass_next(w, r + nr, nr, r1, t == t0));
                                     });
                     });
}

bool decoded_gemm_lane_major(const DotKernels& k, int64_t rows, int64_t cols, int64_t T) {
  return k.reduce_lanes != nullptr && cols >= kLaneMajorMinCols && T >= kLaneMajorMinInputs &&
         rows >= kLaneMajorMinRows;
}

void matmul_decoded(const DecodedMatrix& w, const float* x, int64_t T, float* y,
                    const DotKernels& k, ThreadPool& pool) {
  WICK_CHECK(w.decode != nullptr && w.rows >= 0 && w.cols > 0 && T >= 1 && w.col_block >= 1 &&
                 w.cols % w.col_block == 0,
             "a decoded matrix has a decoder, a shape and column blocks that divide its rows");
  if (w.rows == 0) return;
  const size_t n = static_cast<size_t>(w.cols);
  if (T == 1) {
    // Each block of rows is decoded a few rows at a time into an L1-sized piece (at least one
    // row, at most kDecodeRows), which the GEMV then sums while it is still in cache.
    const int64_t sub =
        std::clamp<int64_t>(kDecodeBytes / (w.cols * int64_t{sizeof(float)}), 1, kDecodeRows);
    for_each_gemv_block(w.rows, w.cols, 1, pool, [&](int64_t r0, int64_t r1, Arena& arena) {
      if (w.gemv != nullptr) return w.gemv(w.ctx, r0, r1, x, y + r0);
      float* rows = arena.get<float>(static_cast<size_t>(sub) * n, Arena::kBlock0);
      for (int64_t r = r0; r < r1; r += sub) {
        const int64_t nr = std::min(sub, r1 - r);
        w.decode(w.ctx, r, r + nr, 0, w.cols, rows);
        k.gemv_f32(rows, n, x, n, static_cast<int>(nr), y + r);
      }
    });
    return;
  }
  if (decoded_gemm_lane_major(k, w.rows, w.cols, T))
    return decoded_lane_major_gemm(w, x, T, y, k, pool);
  // Items of decoded rows held whole: the row-major budget (work::row_gemm_block_bytes).
  for_each_gemm_item(
      w.rows, w.cols, T, k.tile_rows, w.cols * int64_t{sizeof(float)}, pool,
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& arena) {
        float* rows = arena.get<float>(static_cast<size_t>(r1 - r0) * n, Arena::kBlock0);
        w.decode(w.ctx, r0, r1, 0, w.cols, rows);
        gemm_tiles_f32(k, rows, w.cols, w.rows, x, y, r0, r1, t0, t1);
      },
      work::row_gemm_block_bytes());
}

}  // namespace wick::kernels
