// Matrix products that read rwkv-quant's packed codes directly (docs/rwkvq-format.md §2.2, §2.3,
// §2.8): Y[t, o] = sum_i W[o, i] * X[t, i] with W [rows = out, cols = in] in the sb6 or sym layout
// and fp32 activations, accumulated in fp32. No dense copy of W is ever made: each block of codes
// is decoded in registers and used for every input row of a tile, in the block-factorised form
//   sb6: y = sum_b ( s_b * sum_{c in b} q[c] x[c]  +  m_b * xbsum_b )       (blocks of 32)
//   sym: y = sum_b   s_b * sum_{c in b} q[c] x[c]                           (blocks of 16)
// with s_b, m_b exactly as the dequantiser defines them (sb6: max(half(qs*d), 1e-8) and
// half(qm*dm); sym: half(qs*d)).
//
// Contract:
//  * One kernel per instruction set (scalar reference, AVX2+FMA+F16C, AVX-512), chosen by
//    kernels/cpu_features.h like the dense kernels.
//  * Within one instruction set, output (t, o) is bit-identical whatever T, the tile it falls in
//    and the thread count: the recurrent step (T = 1) and the parallel pass agree exactly.
//  * Against float64(dequantise(W)) @ x every result agrees to fp32 accumulation accuracy
//    (tests hold it to 1e-5 relative to sum_i |W[o,i] X[t,i]|).
//  * Threads: the kernel pool (kernels/thread_pool.h), over blocks of output rows.
#pragma once

#include <cstdint>

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
};

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
};

// The 8 six-bit values of 6 bytes of an sb6 `qsqm` entry (docs/rwkvq-format.md §2.1: four values
// per 3 bytes, LSB first): bytes 0-5 hold qs[0..7], bytes 6-11 hold qm[0..7] + 31.
inline void unpack6x8(const uint8_t* p, int* out) {
  for (int g = 0; g < 2; ++g) {
    const uint32_t v = p[3 * g] | (static_cast<uint32_t>(p[3 * g + 1]) << 8) |
                       (static_cast<uint32_t>(p[3 * g + 2]) << 16);
    for (int i = 0; i < 4; ++i) out[4 * g + i] = static_cast<int>((v >> (6 * i)) & 63u);
  }
}

// X: [T, cols] fp32 row-major, Y: [T, rows] fp32 (must not alias X). T >= 1.
class ThreadPool;
// `pool` runs the blocks and holds the prepared inputs; one caller at a time.
void qmatmul(const Sb6Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);
void qmatmul(const SymMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool);

}  // namespace wick::kernels
