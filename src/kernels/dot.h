// Dot products of one stored weight row (fp32, fp16 or bf16) with an fp32 vector, accumulated in
// fp32, and the GEMV / GEMM-tile / widening kernels built on them. Their loops are written once
// (kernels/dot_impl.h) and instantiated per instruction set with that ISA's vector trait
// (dot_scalar.cpp, dot_avx2.cpp, dot_avx512.cpp); `dot_kernels()` returns the set chosen by
// cpu_features.h. The GEMV and the GEMM both follow the dot's summation order, so a row computed
// by either pass is bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/fp16.h"
#include "kernels/cpu_features.h"

namespace wick::kernels {

// fp16 / bf16 bit patterns -> float: the base layer's exact widenings (base/fp16.h).
using base::bf16_to_f32;
using base::f16_to_f32;

using DotF32 = float (*)(const float* w, const float* x, size_t n);
using DotU16 = float (*)(const uint16_t* w, const float* x, size_t n);

// y[r] = dot(w + r * stride, x, n) for r < nr: several rows at once, bit-identical to the dot.
using GemvF32 = void (*)(const float* w, size_t stride, const float* x, size_t n, int nr, float* y);
using GemvU16 = void (*)(const uint16_t* w, size_t stride, const float* x, size_t n, int nr,
                         float* y);
// y[t * y_stride + r] = dot_f32(w + r * w_stride, x + t * x_stride, n) for r < nr, t < nt: the
// GEMM micro-kernel over fp32 (widened) weight rows; most efficient at nr = tile_rows and
// nt = tile_inputs of its kernel set (any sizes are accepted). `next` (nullable) is where the
// weight rows after these nr begin when the caller will read them next: while the first
// tile_inputs inputs pass over each group of tile_rows rows, the whole group after it (the last
// group: as many rows from `next` as the last group has, taken as contiguous, i.e. w_stride == n)
// is prefetched into L2, so a product of few inputs over rows that come from memory does not wait
// on each row's first read (measured on the batched decode, README "Batched decode"). The caller
// passes `next` only where that many rows follow (kernels/matmul.cpp first_pass_next), and
// nullptr for rows already in cache (the fp32 rows copied into an L2 block, the decoded packed
// rows). Prefetching changes no result and faults on no address.
using GemmTile = void (*)(const float* w, size_t w_stride, const float* x, size_t x_stride,
                          size_t n, int nr, int nt, float* y, size_t y_stride, const void* next);
// The same tile over fp16 / bf16 weight rows read in place (each weight widened as it is loaded,
// exactly): bit-identical to GemmTile over the widened rows.
using GemmTileU16 = void (*)(const uint16_t* w, size_t w_stride, const float* x, size_t x_stride,
                             size_t n, int nr, int nt, float* y, size_t y_stride, const void* next);
// The row-major order's lane tree across columns, for a GEMM that runs that order as lane-major
// panels (kernels/matmul.cpp matmul_decoded): y[i] = reduce() of the `lanes` values
// p[j * stride + i], j < lanes - lane j's sum at j - for i < count, bit for bit what the dot adds
// its lanes in. Null on an ISA whose row-major order cannot run that way (scalar: its
// multiply-adds are not fused, the panels' are, and its tree is not a halving one).
using ReduceLanes = void (*)(const float* p, size_t stride, size_t count, float* y);
// 16 rows' elements k .. k + lanes - 1 (rows[i] + k, i < 16) as `lanes` columns of 16 rows, column
// j at dst[j * col_stride + i] - the whole chunks of a lane-major panel (kernels/panels.h
// pack_lane_major_panel). Null where the ISA has none (the panels' SSE2 4 x 4 squares serve).
using TransposeLanes = void (*)(const float* const* rows, size_t k, float* dst, size_t col_stride);
// dst[i] = exact fp32 value of src[i] (fp16 or bf16), i < n.
using Widen = void (*)(const uint16_t* src, float* dst, size_t n);

// The kernels over weights packed into panels (kernels/panels.h: 16 rows per panel, k-major, bf16
// in pairs of columns; every output one fused-multiply-add chain over k in order, the same bits on
// every ISA).
// PanelGemv: y[r] = w_r . x for r < rows, the panels from w (each kPanelRows * panel_cols(cols)
// elements).
using PanelGemvF32 = void (*)(const float* w, size_t cols, const float* x, int64_t rows, float* y);
using PanelGemvU16 = void (*)(const uint16_t* w, size_t cols, const float* x, int64_t rows,
                              float* y);
// PanelTile: y[t * ys + r] (+)= sum over k < nk of w(r, k) * x[t * xs + k] for r < nr, t < nt, the
// chain continuing from y's value when `accumulate` (a later block of k), else from +0; w(r, k) is
// at w[r / 16 * ps + k * 16 + r % 16] (fp32 / fp16), or at w[r / 16 * ps + (k / 2) * 32 + (r % 16)
// * 2 + k % 2] (bf16 pairs), the panels of one block of k (k = 0 even), panel stride ps. Any
// nr x nt; most efficient for multiples of panel_tile_rows x panel_tile_inputs.
using PanelTileF32 = void (*)(const float* w, size_t ps, const float* x, size_t xs, size_t nk,
                              int64_t nr, int nt, float* y, size_t ys, bool accumulate);
using PanelTileU16 = void (*)(const uint16_t* w, size_t ps, const float* x, size_t xs, size_t nk,
                              int64_t nr, int nt, float* y, size_t ys, bool accumulate);

struct DotKernels {
  DotF32 f32;
  DotU16 f16;
  DotU16 bf16;
  GemvF32 gemv_f32;
  GemvU16 gemv_f16;
  GemvU16 gemv_bf16;
  GemmTile gemm_tile;
  GemmTileU16 gemm_tile_f16;
  GemmTileU16 gemm_tile_bf16;
  Widen widen_f16;
  Widen widen_bf16;
  int tile_rows;  // the GEMM tile's register blocking
  int tile_inputs;
  ReduceLanes reduce_lanes;        // nullable
  TransposeLanes transpose_lanes;  // nullable
  int lanes;                       // fp32 lanes of the row-major order's accumulators
  PanelGemvF32 panel_gemv_f32;
  PanelGemvU16 panel_gemv_f16;
  PanelGemvU16 panel_gemv_bf16;
  PanelTileF32 panel_tile_f32;
  PanelTileU16 panel_tile_f16;
  PanelTileU16 panel_tile_bf16;
  Widen panel_widen_bf16;  // bf16 panels' pairs to fp32 k-major order (panel_impl.h widen_pairs)
  int panel_tile_rows;     // the panel GEMM tile's register blocking
  int panel_tile_inputs;
  const char* name;  // "scalar", "avx2", "avx512"
};

const DotKernels& dot_kernels();  // kernel_table().dot
const DotKernels& dot_kernels_for(Isa isa);

// Per-ISA tables (defined in the dot_*.cpp files).
const DotKernels& dot_kernels_scalar();
const DotKernels& dot_kernels_avx2();
const DotKernels& dot_kernels_avx512();

// The products of Precision::kBf16 (wick/model.h) with bf16 weights, on CPUs with AVX-512 BF16
// (vdpbf16ps): weights and inputs are both bf16 bit patterns (the inputs already rounded), each
// step multiplies 32 elements as 16 adjacent pairs, adding both exact products of a pair to one
// of 16 fp32 lanes; per (row, input) one accumulator over the row in order, the last chunk
// zero-padded, then the AVX-512 lane tree. The GEMV and the GEMM tile share that order, so a
// GEMM row equals the GEMV of its input bit for bit (the passes stay equal at bf16 precision).
// Element counts n are in elements (not pairs); odd n is fine.
using Bf16Gemv = void (*)(const uint16_t* w, size_t stride, const uint16_t* x, size_t n, int nr,
                          float* y);
using Bf16GemmTile = void (*)(const uint16_t* w, size_t w_stride, const uint16_t* x,
                              size_t x_stride, size_t n, int nr, int nt, float* y, size_t y_stride,
                              const void* next);
struct Bf16DotKernels {
  Bf16Gemv gemv;           // y[r] = w_r . x, r < nr (rows `stride` elements apart)
  Bf16GemmTile gemm_tile;  // y[t * y_stride + r] = w_r . x_t, r < nr, t < nt; next: GemmTile
  // dst[i] = the bf16 bits of src[i], i < n, for src values that are bf16 values already (as
  // base::round_to_bf16 leaves them): exact, the low 16 bits of each being zero - except that
  // subnormals become zero of their sign, as the dot product reads them anyway (vdpbf16ps treats
  // subnormal inputs as zero).
  void (*pack)(const float* src, uint16_t* dst, size_t n);
  int tile_rows;
  int tile_inputs;
  const char* name;  // "avx512-bf16"
};
// The set for `isa`: the AVX-512 BF16 kernels when isa is kAvx512 and the CPU has AVX512_BF16,
// else null (products of bf16-rounded inputs then take the fp32 kernels above).
const Bf16DotKernels* bf16_dot_kernels_for(Isa isa);
const Bf16DotKernels* bf16_dot_kernels();         // kernel_table().bf16_dot
const Bf16DotKernels& bf16_dot_kernels_avx512();  // dot_bf16_avx512.cpp; CPU must have BF16

}  // namespace wick::kernels
