// Quantised matrix products (kernels/qmatmul.h): instruction-set dispatch of the code decoders
// and the hand-over to the dense kernels (kernels::matmul_decoded), which decode each block of
// rows once per call and sum it with the fp32 GEMV / GEMM tile. The decoders live in
// qmatmul_{scalar,avx2,avx512}.cpp.
#include "kernels/qmatmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace qmat {
namespace {

// Preconditions of the header (cols a positive multiple of 256, the buffers a layout needs).
// Violations are programming errors of the caller: the loader validates files before building
// these views.
bool valid(const Sb6Matrix& w) {
  if (w.rows < 0 || w.cols <= 0 || w.cols % 256 != 0) return false;
  if (w.bits < 4 || w.bits > 6) return false;
  if (!w.codes_packed || !w.qsqm || !w.d || !w.dm) return false;
  return (w.bits < 5 || w.qh) && (w.bits < 6 || w.qh2);
}
bool valid(const SymMatrix& w) {
  if (w.rows < 0 || w.cols <= 0 || w.cols % 256 != 0 || !w.qs || !w.d) return false;
  if (w.bits == 8) return w.codes != nullptr;
  return w.bits == 6 && w.codes_packed && w.qh && w.qh2;
}

template <class M>
struct Source {
  const M* w;
  void (*decode)(const M& w, int64_t r0, int64_t r1, float* out);
  void (*gemv)(const M& w, int64_t r0, int64_t r1, const float* x, float* y);
};

template <class M>
void run(const M& w, const Source<M>& src, const DotKernels& dense, const float* x, int64_t T,
         float* y, ThreadPool& pool) {
  WICK_CHECK(valid(w) && T >= 1, "PackedLinear builds valid packed views");
  DecodedMatrix d;
  d.decode = [](const void* ctx, int64_t r0, int64_t r1, float* dst) {
    const auto* s = static_cast<const Source<M>*>(ctx);
    s->decode(*s->w, r0, r1, dst);
  };
  if (src.gemv != nullptr) {
    d.gemv = [](const void* ctx, int64_t r0, int64_t r1, const float* xv, float* yv) {
      const auto* s = static_cast<const Source<M>*>(ctx);
      s->gemv(*s->w, r0, r1, xv, yv);
    };
  }
  d.ctx = &src;
  d.rows = w.rows;
  d.cols = w.cols;
  matmul_decoded(d, x, T, y, dense, pool);
}

// Blocks of the integer product: rows per block (a multiple of every tile's rows; for T > 1 each
// block's tile of codes is decoded once for all the inputs), and the smallest product worth the
// pool.
constexpr int64_t kInt8BlockRows = 64;
constexpr int64_t kInt8ParallelWeights = 1 << 15;

void run_int8(const Int8InputKernels& k, const Sb6Matrix& w, const Int8Inputs& x, float* y,
              ThreadPool& pool) {
  WICK_CHECK(valid(w) && x.T >= 1 && x.cols == w.cols,
             "PackedLinear passes inputs of the matrix's width");
  const int64_t cols = w.cols, T = x.T, nb = cols / 32;
  // Prepared once on the caller for every block of rows: each input's block sums Q_b, and for the
  // GEMV (T = 1) its codes in the sb6 order (kernels/qmatmul_impl.h).
  Arena& arena = pool.caller_arena();
  float* sums = arena.get<float>(static_cast<size_t>(T * nb), Arena::kCaller1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* src = x.codes + t * cols + 32 * b;
      int32_t q = 0;
      for (int64_t e = 0; e < 32; ++e) q += src[e];
      sums[t * nb + b] = static_cast<float>(q);
    }
  int8_t* ordered = nullptr;
  if (T == 1) {
    ordered = arena.get<int8_t>(static_cast<size_t>(cols), Arena::kCaller0);
    for (int64_t c = 0; c < cols; ++c) ordered[sb6_order(c)] = x.codes[c];
  }
  auto block = [&](int64_t b, Arena& a) {
    const int64_t r0 = b * kInt8BlockRows, r1 = std::min(w.rows, r0 + kInt8BlockRows);
    if (T == 1) {
      k.sb6(w, r0, r1, Sb6Int8Input{ordered, sums, x.scales}, y + r0);
    } else {
      k.sb6_tile(w, r0, r1, x, sums, y + r0, w.rows, a);
    }
  };
  const int64_t blocks = (w.rows + kInt8BlockRows - 1) / kInt8BlockRows;
  if (w.rows * cols * T < kInt8ParallelWeights) {
    for (int64_t b = 0; b < blocks; ++b) block(b, arena);
  } else {
    parallel_for(pool, blocks, block);
  }
}

}  // namespace

const Int8InputKernels& int8_input_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return cpu_has_avx512_vnni() ? int8_input_kernels_avx512_vnni() : int8_input_kernels_avx2();
    case Isa::kAvx2:
      return int8_input_kernels_avx2();
    case Isa::kScalar:
      break;
  }
  return int8_input_kernels_scalar();
}

void qmatmul_int8_inputs_isa(Isa isa, const Sb6Matrix& w, const Int8Inputs& x, float* y,
                             ThreadPool& pool) {
  run_int8(int8_input_kernels_for(isa), w, x, y, pool);
}

const Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return kernels_avx512();
    case Isa::kAvx2:
      return kernels_avx2();
    case Isa::kScalar:
      break;
  }
  return kernels_scalar();
}

void qmatmul_isa(Isa isa, const Sb6Matrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  const Kernels& k = kernels_for(isa);
  run(w, Source<Sb6Matrix>{&w, k.decode_sb6, k.gemv_sb6}, dot_kernels_for(isa), x, T, y, pool);
}

void qmatmul_isa(Isa isa, const SymMatrix& w, const float* x, int64_t T, float* y,
                 ThreadPool& pool) {
  const Kernels& k = kernels_for(isa);
  run(w, Source<SymMatrix>{&w, k.decode_sym, k.gemv_sym}, dot_kernels_for(isa), x, T, y, pool);
}

}  // namespace qmat

void qmatmul(const Sb6Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const KernelTable& k = kernel_table();
  qmat::run(w, qmat::Source<Sb6Matrix>{&w, k.packed.decode_sb6, k.packed.gemv_sb6}, k.dot, x, T, y,
            pool);
}

void qmatmul(const SymMatrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const KernelTable& k = kernel_table();
  qmat::run(w, qmat::Source<SymMatrix>{&w, k.packed.decode_sym, k.packed.gemv_sym}, k.dot, x, T, y,
            pool);
}

void qmatmul_int8_inputs(const Sb6Matrix& w, const Int8Inputs& x, float* y, ThreadPool& pool) {
  qmat::run_int8(*kernel_table().packed_int8, w, x, y, pool);
}

}  // namespace wick::kernels
