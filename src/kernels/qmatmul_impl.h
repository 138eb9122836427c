// Private to the quantised matrix kernels (kernels/qmatmul.h): the per-instruction-set table that
// qmatmul.cpp dispatches to, and the entry points the tests use to run one instruction set
// explicitly. Not part of the library's interface.
//
// Division of labour. qmatmul.cpp owns the threading and the per-call scratch: it asks the table
// to prepare every input row once (a kernel may reorder the columns of x inside each group of 32
// to match the order its code decoder produces, and sb6 needs the per-block sums xbsum), then
// splits the output rows (and, for T > 1, the inputs) into work items and calls the `sb6` / `sym`
// row kernels on each. A row kernel computes every output of its rows for its inputs, tiling the
// inputs by the ISA's register blocking; one output's summation order never depends on the tile,
// the item or the thread, so the result of (t, o) is a function of W[o] and X[t] alone.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/qmatmul.h"

namespace wick::kernels {
class ThreadPool;
}  // namespace wick::kernels

namespace wick::kernels::qmat {

// Columns per group of the prepared input (= the sb6 block width; a sym block pair).
constexpr int64_t kGroup = 32;

struct Kernels {
  // Prepare X [T, cols] for the row kernels of `w`: returns the inputs they read, X itself or px
  // (room for T * cols floats) holding X with the columns of each group of 32 in the order the
  // kernel decodes codes in. prepare_sb6 also writes xbsum[t * cols/32 + g] = the sum of
  // X[t, 32g .. 32g + 31] (in a fixed order).
  const float* (*prepare_sb6)(const Sb6Matrix& w, const float* x, int64_t T, float* px,
                              float* xbsum);
  const float* (*prepare_sym)(const SymMatrix& w, const float* x, int64_t T, float* px);
  // y[t * y_stride + (r - r0)] = row r of W times input t, for r in [r0, r1), t < nt. The inputs
  // are px + t * cols and xbsum + t * cols/32 as prepared above.
  void (*sb6)(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* px, const float* xbsum,
              int64_t nt, float* y, int64_t y_stride);
  void (*sym)(const SymMatrix& w, int64_t r0, int64_t r1, const float* px, int64_t nt, float* y,
              int64_t y_stride);
  int tile_inputs;   // register blocking of the row kernels (inputs decoded per pass over a row)
  const char* name;  // "scalar", "avx2", "avx512"
};

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();
// The table of `isa` (which the CPU must support).
const Kernels& kernels_for(Isa isa);

// qmatmul with an explicit instruction set (tests, benchmarks); qmatmul() uses active_isa().
void qmatmul_isa(Isa isa, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);
void qmatmul_isa(Isa isa, const SymMatrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool);

}  // namespace wick::kernels::qmat
