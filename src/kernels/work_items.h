// How the matrix products share out their work (kernels/matmul.cpp, kernels/qmatmul.cpp): the
// blocks of rows of a GEMV and the items (blocks of rows x spans of inputs) of a GEMM, run on the
// pool or, when small, on the caller (thread_pool.h kParallelMinWork). How work is split never
// changes a result: each output's summation is fixed by the kernel alone.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

namespace wick::kernels::work {

// GEMV (one input): blocks of at most this many output rows; each block streams its rows once.
// A matrix of fewer than 2 x kGemvBlockRows rows per thread is cut into 2 blocks per thread of a
// multiple of kGemvMinRows rows (a multiple of every dense GEMV's row group: 4 or 8; a matrix in
// panels uses 16, a panel's rows: gemv_blocks' `multiple`), so a small
// one - the 64-row LoRA factors of a 768-wide model - does not run on one thread while the others
// wait: BM_GemvFromMemory f32 64 x 768, 2 threads, 10.5-10.8 -> 7.3-7.9 us (two alternating runs on
// a Zen 3). With many threads this also shrinks the blocks of larger matrices (768 rows, 16
// threads: 24-row blocks), where the packed GEMVs' rows from separate parts of a block lie closer
// together; only 2 threads were measured. Work below kParallelMinWork still runs on the caller
// alone (a 32 x 768 fp32 GEMV). The split never changes a result (each row's sum is its own).
constexpr int64_t kGemvBlockRows = 64;
constexpr int64_t kGemvMinRows = 8;
// GEMM (several inputs): an item's rows (at most kGemmBlockBytes as the kernel holds them) stay in
// L2 while every tile of inputs (in L1) passes over them; spans of inputs are long (whole prompts
// when there are enough row blocks), so each weight is read from memory about once per call.
constexpr int64_t kGemmBlockBytes = 192 * 1024;
// The budget of the GEMM over decoded rows (kernels/matmul.h matmul_decoded: a .rwkvq prefill),
// whose items hold their rows whole: with long rows kGemmBlockBytes leaves few rows per item (4
// of the 1.5B FFN's 8192 columns), and every item streams all the inputs again (from L3: 4 MiB
// for 128 inputs). Half of this CPU's L2 instead (cpu_l2_bytes), at least kGemmBlockBytes. Intel
// Emerald Rapids (2 MiB L2), 2 threads, `wick bench --model synth-1.5b-sb64.rwkvq --threads 2
// --prompt 128 --gen 0 --reps 2`: see README. Panels hold a block of columns per row (panels.h)
// and keep kGemmBlockBytes; the other row-major GEMMs were not measured with it and keep it too.
inline int64_t row_gemm_block_bytes() {
  return std::max(kGemmBlockBytes, cpu_l2_bytes() / 2);
}
// Whether a GEMM work item of `inputs` inputs over fp16 / bf16 rows of `cols` elements widens its
// rows into an fp32 block once (kernels/matmul.cpp gemm_item) rather than at every load of the
// 16-bit tile: with many inputs (each row then meets them all, so one widening serves all of them)
// and a tile of inputs small enough to stay in L1 (then the rows, streaming from L2, are all the
// L2 traffic, and doubling their bytes costs less than the tile's widening instructions, which on
// Intel share the FMA ports). Intel Xeon Emerald Rapids, 2 threads, 6 alternating rounds of
// `wick bench --prompt 512 --gen 0 --reps 2` of the 0.1B synth models, medians: bf16 709 -> 811
// tok/s, fp16 746 -> 829 (5 of 6 rounds faster each); widening every item of 64 inputs or more
// instead gave 784 / 816 there, and cost the 1.5B geometry (rows of 2048 and 8192, whose tiles of
// inputs do not fit L1 and share L2 with the rows) 5-10 % at a prompt of 128 (7 of 8 rounds
// slower). On a Zen 5 widening at 64 inputs or more measured level (README, "Batched decode and
// prefill"); at fewer (batched decode's 16 rows) the in-place tile measured 10-25 % faster there.
constexpr int64_t kWidenMinInputs = 64;
constexpr int64_t kWidenMaxTileInputBytes = 24 * 1024;
inline bool widen_rows_first(int64_t inputs, int64_t cols, int64_t tile_inputs) {
  return inputs >= kWidenMinInputs &&
         tile_inputs * cols * int64_t{sizeof(float)} <= kWidenMaxTileInputBytes;
}

// Items per thread to aim for, so a thread the OS descheduled costs little (thread_pool.h).
constexpr int64_t kGemmItemsPerThread = 4;
// Shortest span of inputs an item is split down to.
constexpr int64_t kGemmMinInputs = 32;

// How a GEMV of a matrix of `rows` outputs splits into blocks of rows (see kGemvBlockRows).
// Trivially constructible (no member initialisers): matmul_all keeps an array of them per call.
struct GemvBlocks {
  int64_t rows, block_rows, count;
  // Block b's rows [r0, r1).
  int64_t r0(int64_t b) const { return b * block_rows; }
  int64_t r1(int64_t b) const { return std::min(rows, r0(b) + block_rows); }
};
// Blocks of a multiple of `multiple` rows (the row-major kernels' kGemvMinRows, or a panel's 16
// rows; kGemvBlockRows is a multiple of both), two per thread at least, at most kGemvBlockRows.
inline GemvBlocks gemv_blocks(int64_t rows, int threads, int64_t multiple = kGemvMinRows) {
  const int64_t per_block = (rows + 2 * threads - 1) / (2 * threads);
  const int64_t block_rows = std::clamp<int64_t>((per_block + multiple - 1) / multiple * multiple,
                                                 multiple, kGemvBlockRows);
  return {rows, block_rows, (rows + block_rows - 1) / block_rows};
}

// The blocks of a GEMV (or of a product run once per input, `inputs` of them) of a rows x cols
// matrix: fn(r0, r1, arena) with the running thread's arena.
template <typename Fn>
void for_each_gemv_block(int64_t rows, int64_t cols, int64_t inputs, ThreadPool& pool, Fn&& fn) {
  const GemvBlocks blocks = gemv_blocks(rows, pool.threads());
  parallel_for(pool, blocks.count, rows * cols * inputs,
               [&](int64_t b, Arena& arena) { fn(blocks.r0(b), blocks.r1(b), arena); });
}

// How a GEMM of T inputs and a matrix of `rows` outputs splits into work items: blocks of rows (a
// multiple of the tile's rows, at most kGemmBlockBytes as the kernel holds them unless one tile of
// rows is more) x spans of inputs.
// Trivially constructible, as GemvBlocks.
struct GemmItems {
  int64_t rows, T, block_rows, row_blocks, span, count;
  // Item i: rows [r0, r1) x inputs [t0, t1).
  struct Item {
    int64_t r0, r1, t0, t1;
  };
  Item item(int64_t i) const {
    const int64_t r0 = i % row_blocks * block_rows, t0 = i / row_blocks * span;
    return {r0, std::min(rows, r0 + block_rows), t0, std::min(T, t0 + span)};
  }
};
// `row_bytes`: the bytes of one row as the item holds it.
inline GemmItems gemm_items(int64_t rows, int64_t T, int64_t tile_rows, int64_t row_bytes,
                            int threads, int64_t block_bytes = kGemmBlockBytes) {
  // Row blocks: as many rows as fit the L2 budget, but enough blocks for every thread.
  const int64_t tr = tile_rows;
  const int64_t fit_rows = std::max<int64_t>(1, block_bytes / row_bytes / tr) * tr;
  const int64_t want_blocks = kGemmItemsPerThread * threads;
  const int64_t even_rows = ((rows + want_blocks - 1) / want_blocks + tr - 1) / tr * tr;
  const int64_t block_rows = std::max(tr, std::min(fit_rows, even_rows));
  const int64_t row_blocks = (rows + block_rows - 1) / block_rows;
  // Spans of inputs: one (all T) unless there are too few row blocks to share out.
  const int64_t want_spans = std::max<int64_t>(1, (want_blocks + row_blocks - 1) / row_blocks);
  const int64_t spans = std::max<int64_t>(1, std::min(want_spans, T / kGemmMinInputs));
  const int64_t span = (T + spans - 1) / spans;
  const int64_t input_blocks = (T + span - 1) / span;
  return {rows, T, block_rows, row_blocks, span, row_blocks * input_blocks};
}

// The work items of a GEMM of T inputs and a rows x cols matrix whose rows take `row_bytes` each
// as the item holds them: fn(r0, r1, t0, t1, arena) for each of gemm_items().
template <typename Fn>
void for_each_gemm_item(int64_t rows, int64_t cols, int64_t T, int64_t tile_rows, int64_t row_bytes,
                        ThreadPool& pool, Fn&& fn, int64_t block_bytes = kGemmBlockBytes) {
  const GemmItems items = gemm_items(rows, T, tile_rows, row_bytes, pool.threads(), block_bytes);
  parallel_for(pool, items.count, rows * cols * T, [&](int64_t i, Arena& arena) {
    const GemmItems::Item it = items.item(i);
    fn(it.r0, it.r1, it.t0, it.t1, arena);
  });
}

}  // namespace wick::kernels::work
