// Weights packed into panels: the layout of an outer-product GEMV / GEMM (the BLIS form), in which
// a vector holds several output rows' weights of one input element, so every output is a single
// fused-multiply-add chain and no horizontal sum is ever taken.
//
// Layout (MatrixRef with layout MatrixLayout::kPanels, kernels/matmul.h) of a [rows, cols] matrix
// of dtype F32 / F16 / BF16: panel p (p < panel_count(rows)) holds rows 16 p .. 16 p + 15 over
// c = panel_cols(cols, dtype) columns (cols, or for BF16 cols rounded up to even), k-major:
//   F32, F16: element (row r, column k) at data[(r / 16) * 16 * c + k * 16 + r % 16]
//   BF16:     element (row r, column k) at data[(r / 16) * 16 * c + (k / 2) * 32 + (r % 16) * 2
//             + k % 2] - columns in pairs, each row's two weights of a pair side by side, so one
//             32-bit lane holds both and a load of 16 lanes gives two steps of k: the low halves
//             (shifted up 16 places) one, the high halves (masked) the next, with no widening
//             shuffle (vpmovzxwd), whose port the multiply-adds share on Intel cores.
// The rows of the last panel past `rows` are zero, and so is a BF16 panel's padding column (never
// multiplied: the kernels take its pair's low half only). panel_bytes() bytes in all.
//
// Summation order (the same on every instruction set, so the scalar, AVX2 and AVX-512 kernels give
// the same bits): y[t, r] = s_cols where s_0 = +0 and s_{k+1} = fma(w[r][k], x[t][k], s_k) - one
// rounding per step, k in order. The GEMV (T = 1) and the GEMM (T > 1) both follow it, so row t of
// a GEMM equals the GEMV of X[t] bit for bit, whatever the thread count, the tile sizes or where
// the row sits in a batch. It is not the order of row-major matrices (lane-wise partial sums and
// a tree, kernels/dot.h): the two agree to rounding, not in bits. The products themselves are
// kernels/matmul.h's matmul() / matmul_all() of such a MatrixRef.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/work_items.h"
#include "wick/dtype.h"

namespace wick::kernels {

// Rows per panel (and outputs per GEMV chain group of one vector of 16 fp32 lanes).
inline constexpr int64_t kPanelRows = 16;
static_assert(work::kGemvBlockRows % kPanelRows == 0, "GEMV blocks hold whole panels");
// Columns one block of the GEMM's running sums covers (see panel_gemm_item). 512, not 256: on an
// Intel Emerald Rapids (2 threads, alternating rounds of wick bench) 1.5B bf16 prefill 81.8-94.7 ->
// 91.7-99.8 tok/s (8 of 8 rounds), 0.1B fp32 1109-1145 -> 1177-1199 (3 of 3), 0.1B bf16 level (3
// of 5), WICK_ISA=avx2 bf16 523-599 -> 634-655 (2 of 2); 16-row batched decode level. 1024 read
// level with 512 at 0.1B and +1-6 % at 1.5B, but a tile's inputs over 1024 columns (32 KiB at
// AVX-512's 8) would fill a 32 KiB L1 (Zen 3 / Zen 4); at 512 they take 16 KiB (AVX2's 6: 12).
// The block changes no result (the running sums continue through Y in order).
inline constexpr int64_t kPanelColumnBlock = 512;
static_assert(kPanelColumnBlock % 2 == 0, "blocks of columns begin on a pair of bf16 panels");
// Inputs from which a GEMM work item widens its 16-bit panels once rather than at every load.
inline constexpr int64_t kPanelWidenMinInputs = 24;

// Whether panels of `dtype` hold their columns in pairs (the layout above): BF16 only. (fp16 gains
// nothing: its conversion vcvtph2ps takes 16 packed halves, so pairs would need a shuffle back.)
constexpr bool panel_pairs(DType dtype) {
  return dtype == DType::BF16;
}
// Columns a panel stores for a matrix of `cols` columns: cols, rounded up to even for pairs.
constexpr int64_t panel_cols(int64_t cols, DType dtype) {
  return panel_pairs(dtype) ? (cols + 1) / 2 * 2 : cols;
}
// Panels a matrix of `rows` rows takes: ceil(rows / 16).
int64_t panel_count(int64_t rows);

// The lane-major panels of a GEMM in a row-major matrix's order (kernels/matmul.cpp
// matmul_decoded; kernels/dot.h ReduceLanes). That order sums each row's elements k = j, j + lanes,
// j + 2 lanes, ... in lane j (one fused multiply-add chain each, zero-padded to whole chunks of
// `lanes`), then adds the lanes in a tree. With lane j's elements as the C =
// lane_major_chunks(n, lanes) = ceil(n / lanes) columns of a panel from column j S on, S =
// lane_major_stride(n, lanes) = C + 1, the panel tile over those columns gives lane j's sum
// exactly (the same chain, from +0) and reduce_lanes adds the lanes as the dot does. (S is C + 1
// so the lanes' columns do not lie a power of two apart: at 8192 columns and 16 lanes, C columns
// of 64 bytes are 32 KiB, which put every lane's line in one L1 set. One panel of 16 rows alone,
// Intel Emerald Rapids: S = C packed 2.1-2.6 elements/ns at 2048 and 8192 columns, S = C + 1
// 3.6-5.5.)
int64_t lane_major_chunks(int64_t n, int lanes);
int64_t lane_major_stride(int64_t n, int lanes);
// Rows [0, nr) (1 <= nr <= 16; row i at rows + i * row_stride, n columns) into dst as one fp32
// panel of lanes * S columns: element (i, k) at dst[((k % lanes) * S + k / lanes) * 16 + i]; rows
// past nr and the other columns zero (zeroed here). lanes: a power of two, 4 or more. `transpose`
// (nullable; kernels/dot.h DotKernels::transpose_lanes of an ISA with `lanes` lanes) moves the
// whole chunks of a full panel (nr = 16); the same placement either way. With k_begin / k_end
// only columns [k_begin, k_end) are placed, rows then holding just those (row i's column k at
// rows[i * row_stride + k - k_begin]): a panel packed block by block, k_begin = 0 first (that
// call does the zeroing), every later call with the same dst, nr, n, lanes and transpose, the
// ranges together covering [0, n) (a column left out keeps whatever dst held); k_end is clamped
// to n. Throws wick::InternalError (WICK_CHECK) for other nr or lanes, an empty range or a
// row_stride below its width.
void pack_lane_major_panel(const float* rows, size_t row_stride, int64_t nr, size_t n, int lanes,
                           float* dst, TransposeLanes transpose = nullptr, size_t k_begin = 0,
                           size_t k_end = SIZE_MAX);
// One input of n elements in the same order: dst[j * S + c] = x[c * lanes + j] for c * lanes + j
// < n, zero elsewhere (lanes * S elements), so the panel tile over lane j's columns reads lane j's
// inputs in order. Throws wick::InternalError (WICK_CHECK) for lanes other than a power of two of
// 4 or more.
void lane_major_inputs(const float* x, size_t n, int lanes, float* dst);
// Bytes of the packed form of a rows x cols matrix of `dtype`: panel_count(rows) * 16 *
// panel_cols(cols, dtype) elements. Throws wick::InternalError (WICK_CHECK) for a dtype other than
// F32/F16/BF16 or a negative size.
size_t panel_bytes(int64_t rows, int64_t cols, DType dtype);

// Packs the row-major matrix w (layout kRows) into `dst` (panel_bytes(w.rows, w.cols, w.dtype)
// bytes, aligned to the element size, not overlapping w) in the layout above, the same elements
// bit for bit, zero rows padding the last panel; the panels are shared out on `pool`. Returns the
// packed matrix (layout kPanels, data = dst; dst stays the caller's). Throws wick::InternalError
// (WICK_CHECK) for a matrix that is not F32/F16/BF16, has no rows or columns or is packed already.
MatrixRef pack_panels(const MatrixRef& w, void* dst, ThreadPool& pool);

// The pieces kernels/matmul.cpp shares out for a matrix in panels (matmul(), matmul_all()).
// GEMV: blocks of whole panels (work::gemv_blocks(rows, threads, kPanelRows): two per thread at
// least and at most work::kGemvBlockRows rows each), every block streamed once (16-bit panels
// prefetched ahead into L1, panel_impl.h kPanelPrefetchBytes); panel_gemv_block computes
// y[r0, r1).
void panel_gemv_block(const DotKernels& k, const MatrixRef& w, const float* x, int64_t r0,
                      int64_t r1, float* y);
// GEMM: work items of whole tiles of rows x spans of inputs (work::gemm_items, the rows of a block
// of columns held in fp32 within its L2 budget). An item runs the columns in blocks of
// kPanelColumnBlock (the running sums are stored in Y between blocks and continued, which keeps
// each chain's order), widens a block of its fp16 / bf16 panels to fp32 once in `arena`
// (kBlock0; bf16 pairs are taken apart into k-major fp32 rows there) when kPanelWidenMinInputs or
// more inputs pass over it (else the tile widens weights as it loads them), and passes one tile of
// inputs at a time over its panels, so the tile stays in L1 while the panels come from L2.
work::GemmItems panel_gemm_items(const DotKernels& k, const MatrixRef& w, int64_t T, int threads);
void panel_gemm_item(const DotKernels& k, const MatrixRef& w, const float* x, float* y,
                     const work::GemmItems::Item& item, Arena& arena);

}  // namespace wick::kernels
