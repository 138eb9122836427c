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
#include "kernels/qmatmul.h"

namespace wick::kernels {
class ThreadPool;
}  // namespace wick::kernels

namespace wick::kernels::qmat {

struct Kernels {
  // Rows [r0, r1) of w as fp32: out[(r - r0) * w.cols + c] = the dequantised W[r, c].
  void (*decode_sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, float* out);
  void (*decode_sym)(const SymMatrix& w, int64_t r0, int64_t r1, float* out);
  // y[r - r0] = W[r] . x for r in [r0, r1) with the codes decoded in registers, bit-identical to
  // the dense fp32 GEMV of this instruction set over decode_*'s rows; null where the instruction
  // set has none (then the GEMV sums decoded blocks of rows).
  void (*gemv_sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* x, float* y);
  void (*gemv_sym)(const SymMatrix& w, int64_t r0, int64_t r1, const float* x, float* y);
  const char* name;  // "scalar", "avx2", "avx512"
};

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
// The table of `isa` (which the CPU must support).
const Kernels& kernels_for(Isa isa);

// qmatmul with an explicit instruction set for the decoders and the dense kernels (tests,
// benchmarks); qmatmul() uses active_isa().
void qmatmul_isa(Isa isa, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);
void qmatmul_isa(Isa isa, const SymMatrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);

}  // namespace wick::kernels::qmat
