// Private to the quantised matrix kernels (kernels/qmatmul.h): the per-instruction-set table of
// code decoders that qmatmul.cpp dispatches to, and the entry points the tests use to run one
// instruction set explicitly. Not part of the library's interface.
//
// Division of labour. A decoder turns rows of codes into fp32 weights, exactly as the dequantiser
// defines them (docs/rwkvq-format.md §2.2, §2.3; quant/dequant.h), so every instruction set's
// decoder gives the same floats. qmatmul.cpp hands them to the dense fp32 kernels through
// kernels::matmul_decoded (kernels/matmul.h), which owns the threading and the summation order.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/int8_inputs.h"
#include "kernels/qmatmul.h"

namespace wick::kernels {
class Arena;
class ThreadPool;
}  // namespace wick::kernels

namespace wick::kernels::qmat {

struct Kernels {
  // Rows [r0, r1) x columns [c0, c1) of w as fp32 (c0 <= c1 <= w.cols, both multiples of 256:
  // whole superblocks; unchecked, this is the GEMM's inner loop - kernels/matmul.cpp
  // matmul_decoded checks the DecodedMatrix's col_block once): out[(r - r0) * (c1 - c0) + c - c0]
  // = the dequantised W[r, c].
  void (*decode_sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                     float* out);
  void (*decode_sym)(const SymMatrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                     float* out);
  // y[r - r0] = W[r] . x for r in [r0, r1) with the codes decoded in registers, bit-identical to
  // the dense fp32 GEMV of this instruction set over decode_*'s rows; null where the instruction
  // set has none (then the GEMV sums decoded blocks of rows).
  void (*gemv_sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* x, float* y);
  void (*gemv_sym)(const SymMatrix& w, int64_t r0, int64_t r1, const float* x, float* y);
  // Rows [r0, r1) of unpack_sb6_scales(w) (kernels/qmatmul.h) into out (w.sm not read).
  void (*unpack_sb6_scales)(const Sb6Matrix& w, int64_t r0, int64_t r1, uint16_t* out);
  // Rows [r0, r1) of repack_sb6_high_bits(w) (kernels/qmatmul.h; bits 5 or 6) into out.
  void (*repack_sb6_high_bits)(const Sb6Matrix& w, int64_t r0, int64_t r1, uint8_t* out);
  // Rows [r0, r1) of repack_sym6_high_bits(w) (kernels/qmatmul.h) into out.
  void (*repack_sym6_high_bits)(const SymMatrix& w, int64_t r0, int64_t r1, uint8_t* out);
  const char* name;  // "scalar", "avx2", "avx512"
};

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
// The table of `isa` (which the CPU must support).
const Kernels& kernels_for(Isa isa);

// ---- integer-domain sb6 and sym products of inputs rounded to 8 bits (kernels/qmatmul.h
// qmatmul_int8_inputs) ----
//
// One input row as the kernels read it. Codes are in the "sb6 order": within each group of 128
// columns (4 blocks of 32), first the low halves of the 4 blocks (columns 32p + e, p = 0..3,
// e = 0..15), then their high halves (32p + 16 + e) - the order in which a 64-byte load of the
// nibbles splits into low and high nibbles (docs/rwkvq-format.md §2.2: byte e of a block holds
// columns e and e + 16).
struct Sb6Int8Input {
  const int8_t* codes;      // [cols] in the sb6 order
  const float* block_sums;  // [cols / 32] Q_b = the sum of block b's codes, as a float (exact)
  const float* scales;      // [cols / 256] dx_j, the input's scale of superblock j
};

// Position of column c in the sb6 order.
inline int64_t sb6_order(int64_t c) {
  const int64_t g = c / 128, p = (c % 128) / 32, h = (c % 32) / 16, e = c % 16;
  return 128 * g + 64 * h + 16 * p + e;
}

// One input of the sym GEMV (Int8InputKernels::sym).
struct SymInt8Input {
  const int8_t* codes;        // [cols] in column order
  const int8_t* ordered;      // sym@6: [cols] in the sym@6 order (sym6_order), else unused
  const int32_t* block_sums;  // sym@6: [cols / 16] the sum of each 16-column block's codes
  const float* scales;        // [cols / 256] dx_j, the input's scale of superblock j
};

// Position of column c in the sym@6 order: per 64 columns (4 blocks of 16), columns 0-7 of each
// block, then columns 8-15 of each - the low and the high nibbles of 32 packed bytes.
inline int64_t sym6_order(int64_t c) {
  const int64_t g = c / 64, k = (c % 64) / 16, h = (c % 16) / 8, e = c % 8;
  return 64 * g + 32 * h + 8 * k + e;
}

struct Int8InputKernels {
  // y[u * yi + (r - r0)] for r in [r0, r1) and u < n (1 or 2): the product of qmatmul.h
  // qmatmul_int8_inputs, row r of w with x[u] (codes in the sb6 order). The GEMV of the decode
  // step, and of a few inputs (fewer than the tile's threshold) two at a time: they share each
  // row's decoded codes.
  void (*sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input* x, int n, float* y,
              int64_t yi);
  // The same products for rows [r0, r1) and every input t < x.T, into y[t * ys + (r - r0)]: the
  // rows' codes are decoded once into a tile in `arena` (slots kBlock0, kBlock1) that every
  // input then passes over. x.codes in natural column order; sums [x.T, cols / 32] the block
  // sums Q_b as floats. The GEMM of the parallel pass and of batched decode; each output has the
  // bits of sb6().
  void (*sb6_tile)(const Sb6Matrix& w, int64_t r0, int64_t r1, const Int8Inputs& x,
                   const float* sums, float* y, int64_t ys, Arena& arena);
  // y[r - r0] for r in [r0, r1): the product of qmatmul.h qmatmul_int8_inputs for a sym matrix,
  // row r of w with one input. The GEMV of the decode step, and of a few inputs (fewer than the
  // tile's threshold) once each.
  void (*sym)(const SymMatrix& w, int64_t r0, int64_t r1, const SymInt8Input& x, float* y);
  // The same for rows [r0, r1) and every input t < x.T, into y[t * ys + (r - r0)], through a tile
  // of the rows' codes in `arena` (slots kBlock0, kBlock1) as sb6_tile; q16 [x.T, cols / 16] the
  // sums of each input's 16-column blocks of codes. Each output has the bits of sym().
  void (*sym_tile)(const SymMatrix& w, int64_t r0, int64_t r1, const Int8Inputs& x,
                   const int32_t* q16, float* y, int64_t ys, Arena& arena);
  int tile_rows;        // rows the tile holds per vector (a block of rows is best a multiple of it)
  bool sb6_high_bits;   // sb6() reads Sb6Matrix::hb for bits >= 5 (kernels/qmatmul.h)
  bool sym6_high_bits;  // sym() reads SymMatrix::hb for bits 6
  const char* name;     // "scalar", "avx2", "avx512-vnni"
};

const Int8InputKernels& int8_input_kernels_scalar();
const Int8InputKernels& int8_input_kernels_avx2();
const Int8InputKernels& int8_input_kernels_avx512_vnni();
// The kernels for `isa`, at the level int8_isa(isa) (kernels/cpu_features.h).
const Int8InputKernels& int8_input_kernels_for(Isa isa);

// qmatmul_int8_inputs with an explicit instruction set (tests, benchmarks).
void qmatmul_int8_inputs_isa(Isa isa, const Sb6Matrix& w, const Int8Inputs& x, float* y,
                             ThreadPool& pool);
void qmatmul_int8_inputs_isa(Isa isa, const SymMatrix& w, const Int8Inputs& x, float* y,
                             ThreadPool& pool);

// qmatmul with an explicit instruction set for the decoders and the dense kernels (tests,
// benchmarks); qmatmul() uses active_isa().
void qmatmul_isa(Isa isa, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);
void qmatmul_isa(Isa isa, const SymMatrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);

}  // namespace wick::kernels::qmat
