// Quantised matrix products (kernels/qmatmul.h): instruction-set dispatch of the code decoders
// and the hand-over to the dense kernels (kernels::matmul_decoded), which decode each block of
// rows once per call and sum it with the fp32 GEMV / GEMM tile. The decoders live in
// qmatmul_{scalar,avx2,avx512}.cpp.
#include "kernels/qmatmul.h"

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/qmatmul_impl.h"

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

}  // namespace

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

}  // namespace wick::kernels
