// Matrix products with rwkv-quant's packed codes (docs/rwkvq-format.md §2.2, §2.3):
// Y[t, o] = sum_i W[o, i] * X[t, i] with W [rows = out, cols = in] in the sb6 or sym layout and
// fp32 activations. W is the dequantised matrix exactly as the spec defines it (sb6:
// w = q * s_b + m_b, multiplied then added, s_b = max(half(qs*d), 1e-8), m_b = half(qm*dm); sym:
// w = q * half(qs*d)) - the floats quant::dequantize gives.
//
// Contract of qmatmul() (the qmatmul_int8_inputs below have their own):
//  * Each output is the dense fp32 dot kernel (kernels/dot.h) of the decoded row and the input,
//    bit for bit: qmatmul(W, X) equals matmul() of an fp32 matrix holding dequantize(W), so the
//    recurrent step (T = 1) and the parallel pass agree exactly, whatever T, the tile an output
//    falls in and the thread count (kernels/matmul.h: matmul_decoded).
//  * No dense copy of W is kept: each block of rows is decoded when a call needs it (GEMV: in
//    registers, or a few rows at a time into an L1-sized block; GEMM: a work item's block of
//    rows once, for all the item's inputs), by a decoder per instruction set (scalar reference,
//    AVX2+FMA+F16C, AVX-512), chosen by kernels/cpu_features.h like the dense kernels; all give
//    the same floats.
//  * Threads: the kernel pool (kernels/thread_pool.h), over blocks of output rows (and inputs).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/int8_inputs.h"

namespace wick::kernels {

// sb6 (asymmetric, blocks of 32 columns, superblocks of 8 blocks; bits 4, 5 or 6). cols % 256 == 0.
// All pointers address row 0; rows are contiguous. Byte buffers need no alignment.
struct Sb6Matrix {
  const uint8_t* codes_packed = nullptr;  // [rows, cols/2]  low 4 bits, block-local nibble split
  const uint8_t* qh = nullptr;            // [rows, cols/8]  bit 4 plane (bits >= 5), else null
  const uint8_t* qh2 = nullptr;           // [rows, cols/8]  bit 5 plane (bits == 6), else null
  const uint8_t* qsqm = nullptr;          // [rows, cols/256, 12] 6-bit qs x8, (qm+31) x8
  const uint8_t* d = nullptr;             // fp16 [rows, cols/256] superblock scale of qs
  const uint8_t* dm = nullptr;            // fp16 [rows, cols/256] superblock scale of qm
  int64_t rows = 0, cols = 0;
  int bits = 4;
  // fp16 [rows, cols/256, 16], 32-byte rows of superblocks: the 8 block scales half(qs_b d)
  // before their floor, then the 8 m_b = half(qm_b dm); unpack_sb6_scales() makes it from qsqm,
  // d and dm (the scalar decoders read those; the SIMD kernels read the scales only from here:
  // one 32-byte load per superblock, not 6-bit fields unpacked and rounded per row and call).
  // qmatmul() and qmatmul_int8_inputs() need it set, whatever the instruction set.
  const uint16_t* sm = nullptr;
  // bits >= 5: the bit planes rearranged for the AVX2 integer GEMV (repack_sb6_high_bits below),
  // [rows, cols/256, 32 * (bits - 4)] bytes. The AVX2 integer GEMV reads it in place of qh and
  // qh2, so qmatmul_int8_inputs() needs it set when sb6_reads_high_bits(); the other kernels
  // ignore it.
  const uint8_t* hb = nullptr;
};

// The `sm` array of w (qsqm, d and dm set; sm not read), [rows * cols / 256 * 16] fp16 bits.
// The owner of the matrix view keeps it beside the view (model/quant_linear.h: 1 bit per weight
// on top of the file's codes). Every value is exact: s and m are fp16 values by definition.
std::vector<uint16_t> unpack_sb6_scales(const Sb6Matrix& w);

// The `hb` array of w (bits 5 or 6, qh and qh2 set), [rows * cols / 256 * 32 * (bits - 4)] bytes.
// Per superblock the integer GEMV decodes 8 code vectors v = 2p + half (p = 0..3: blocks 2p and
// 2p + 1 of the superblock; half 0: columns 0-15 of each block, 1: columns 16-31), byte
// 16 l + e of vector v holding column 16 half + e of block 2p + l. hb gives each code byte's high
// bits at the same byte index, one vector shift away: bits 5: 32 bytes, bit v of byte i = the qh
// bit of vector v's byte i; bits 6: 64 bytes, bits 2k, 2k + 1 of byte 32 (v / 4) + i = the qh and
// qh2 bits of vector v's byte i (k = v % 4). The same bits as the planes, moved: no rounding.
std::vector<uint8_t> repack_sb6_high_bits(const Sb6Matrix& w);

// Whether the active instruction set's integer sb6 GEMV reads Sb6Matrix::hb (AVX2: spreading
// the file's plane bits to bytes cost it more than the rest of the decode; AVX-512 adds them with
// mask registers, and the scalar kernels read the planes).
bool sb6_reads_high_bits();

// sym (symmetric, blocks of 16 columns, superblocks of 16 blocks; bits 6 or 8). cols % 256 == 0.
struct SymMatrix {
  const int8_t* codes = nullptr;          // bits 8: [rows, cols] signed codes
  const uint8_t* codes_packed = nullptr;  // bits 6: [rows, cols/2] u = q + 32, gs-16 nibble split
  const uint8_t* qh = nullptr;            // bits 6: [rows, cols/8]
  const uint8_t* qh2 = nullptr;           // bits 6: [rows, cols/8]
  const int8_t* qs = nullptr;             // [rows, cols/16] per-block scale code
  const uint8_t* d = nullptr;             // fp16 [rows, cols/256] superblock scale
  int64_t rows = 0, cols = 0;
  int bits = 8;
  // bits 6: the bit planes rearranged for the SIMD integer GEMV (repack_sym6_high_bits below),
  // [rows, cols/256, 64] bytes. The AVX2 and AVX-512 VNNI integer GEMVs read it in place of qh
  // and qh2, so qmatmul_int8_inputs() needs it set when sym6_reads_high_bits(); the other
  // kernels ignore it.
  const uint8_t* hb = nullptr;
};

// The `hb` array of a sym@6 matrix w, [rows * cols / 256 * 64] bytes: per superblock the integer
// GEMV decodes 8 code vectors v = 2g + half (g = 0..3: columns 64g .. 64g + 63; byte i of vector v
// is column 64g + 16 (i / 8) + 8 half + i % 8, the nibble layout's order), and hb holds the qh and
// qh2 bits of vector v's byte i in bits 2k, 2k + 1 of byte 32 (v / 4) + i (k = v % 4), as
// repack_sb6_high_bits does at 6 bits.
std::vector<uint8_t> repack_sym6_high_bits(const SymMatrix& w);

// Whether the active instruction set's integer sym@6 GEMV reads SymMatrix::hb (the AVX2 and
// AVX-512 VNNI ones; the scalar kernels read the planes).
bool sym6_reads_high_bits();

// The `hb` array the active instruction set's integer GEMV (qmatmul_int8_inputs) reads for w
// (the owners of packed views call this rather than writing the rule again; qmatmul_int8_inputs
// checks that hb is set where it is read): repack_sb6_high_bits(w) when w.bits >= 5 and
// sb6_reads_high_bits(), repack_sym6_high_bits(w) when w.bits == 6 and sym6_reads_high_bits(),
// else empty (leave hb null). The caller owns the array and keeps it while w.hb points into it.
// Throws InternalError where the repackers do (a view without its planes, sb6 bits above 6) and
// InputError where kernel_table() does (a WICK_ISA the CPU lacks).
std::vector<uint8_t> int8_high_bits(const Sb6Matrix& w);
std::vector<uint8_t> int8_high_bits(const SymMatrix& w);
// int8_high_bits(w) with w.hb pointed at the array (null when it is empty), for owners that build
// the view and the array together: the caller keeps the returned array (moving it keeps w.hb
// valid) while w is used. Throws as int8_high_bits.
[[nodiscard]] std::vector<uint8_t> attach_int8_high_bits(Sb6Matrix& w);
[[nodiscard]] std::vector<uint8_t> attach_int8_high_bits(SymMatrix& w);

// The 8 six-bit values of 6 bytes of an sb6 `qsqm` entry (docs/rwkvq-format.md §2.1: four values
// per 3 bytes, LSB first): bytes 0-5 hold qs[0..7], bytes 6-11 hold qm[0..7] + 31.
inline void unpack6x8(const uint8_t* p, int* out) {
  for (int g = 0; g < 2; ++g) {
    const uint32_t v = p[3 * g] | (static_cast<uint32_t>(p[3 * g + 1]) << 8) |
                       (static_cast<uint32_t>(p[3 * g + 2]) << 16);
    for (int i = 0; i < 4; ++i) out[4 * g + i] = static_cast<int>((v >> (6 * i)) & 63u);
  }
}

// The reference decoders: rows [r0, r1) of w as fp32 into out[(r1 - r0) * w.cols], one weight at
// a time exactly as docs/rwkvq-format.md §2.2 / §2.3 define them - the floats of
// quant::dequantize_rows (which calls these) and of every instruction set's decoder. Pure
// functions of their arguments (thread-safe); the caller keeps r0 <= r1 <= w.rows.
void decode_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, float* out);
void decode_rows(const SymMatrix& w, int64_t r0, int64_t r1, float* out);

// X: [T, cols] fp32 row-major, Y: [T, rows] fp32 (must not alias X). T >= 1.
class ThreadPool;
// `pool` runs the blocks and holds the prepared inputs; one caller at a time.
void qmatmul(const Sb6Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);
void qmatmul(const SymMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

// The product of inputs rounded to 8 bits per 256-column superblock (Precision::kInt8,
// wick/model.h; codes x_c and superblock scales dx_j from kernels/int8_inputs.h
// round_inputs_int8), computed in integers. For each block b = (j, i) of 32 columns (superblock
// j, block i = 0..7 in it): S_b = sum_c q_c x_c and Q_b = sum_c x_c exactly in int32, and the
// block's scales s_b, m_b (the dequantiser's, so w_c = q_c s_b + m_b). Each output is
// clang-format off
//
//     for j = 0 .. cols/256 - 1, for i = 0..7:
//         a_i = a_i + (float(S_b) * s_b + float(Q_b) * m_b) * dx_j
//     Y[t, o] = ((a_0 + a_4) + (a_2 + a_6)) + ((a_1 + a_5) + (a_3 + a_7))
//
// clang-format on
// every product and sum rounded to fp32 on its own, in that order (a_i start at 0). In exact
// arithmetic that is the dot product of the dequantised row with the rounded inputs
// float(x_c) dx_j; in fp32 it rounds at other points than the fp32 kernels would (no weight is
// rounded on its own; the scales apply per block). The integer sums do not depend on the order
// they are added in, so the scalar, AVX2 and AVX-512 VNNI kernels give the same bits, and each
// output is a function of W[o] and X[t] alone (batch rows equal single rows; the parallel pass
// equals the recurrent step). x.cols == w.cols; Y [x.T, rows] must not alias x's buffers.
// `pool` runs blocks of output rows (and spans of inputs) and holds the prepared inputs (one
// caller at a time).
void qmatmul_int8_inputs(const Sb6Matrix& w, const Int8Inputs& x, float* y, ThreadPool& pool);

// The same for a sym matrix (bits 6 or 8): for each block b = (j, i) of 16 columns (superblock j,
// block i = 0..15 in it), S_b = sum_c q_c x_c exactly in int32 (q_c the signed code: -128..127 at
// 8 bits, u - 32 at 6) and the block's scale s_b = half(qs_b d_j) (the dequantiser's, w_c =
// q_c s_b). Each output is
// clang-format off
//
//     for j = 0 .. cols/256 - 1:
//         for i = 0..7:  a_i = a_i + (float(S_(16j+i)) * s_(16j+i)) * dx_j
//         for i = 0..7:  a_i = a_i + (float(S_(16j+8+i)) * s_(16j+8+i)) * dx_j
//     Y[t, o] = ((a_0 + a_4) + (a_2 + a_6)) + ((a_1 + a_5) + (a_3 + a_7))
//
// clang-format on
// every product and sum rounded to fp32 on its own, in that order (a_i start at 0): the dot
// product of the dequantised row with the rounded inputs, rounded at other points than the fp32
// kernels. Every instruction set gives the same bits, each output a function of W[o] and X[t]
// alone, with the same conditions on x, Y and `pool` as above; the input codes must lie in
// [-127, 127] as round_inputs_int8 makes them (the kernels move each weight's sign onto the input
// code, which -128 would overflow).
void qmatmul_int8_inputs(const SymMatrix& w, const Int8Inputs& x, float* y, ThreadPool& pool);

}  // namespace wick::kernels
