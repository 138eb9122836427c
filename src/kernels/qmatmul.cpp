// Quantised matrix products (kernels/qmatmul.h): instruction-set dispatch of the code decoders
// and the hand-over to the dense kernels (kernels::matmul_decoded), which decode each block of
// rows once per call and sum it with the fp32 GEMV / GEMM tile; and the work split of the integer
// products of rounded inputs (qmatmul_int8_inputs). The decoders live in
// qmatmul_{scalar,avx2,avx512}.cpp, the integer kernels in qmatmul_scalar.cpp and
// qmatmul_int8_{avx2,avx512}.cpp.
#include "kernels/qmatmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/thread_pool.h"
#include "kernels/work_items.h"

namespace wick::kernels {
namespace qmat {
namespace {

// Preconditions of the header (cols a positive multiple of 256, the buffers a layout needs).
// Violations are programming errors of the caller: the loader validates files before building
// these views.
bool valid(const Sb6Matrix& w) {
  if (w.rows < 0 || w.cols <= 0 || w.cols % 256 != 0) return false;
  if (w.bits < 4 || w.bits > 6) return false;
  if (!w.codes_packed || !w.qsqm || !w.d || !w.dm || !w.sm) return false;
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
  void (*decode)(const M& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);
  void (*gemv)(const M& w, int64_t r0, int64_t r1, const float* x, float* y);
};

template <class M>
void run(const M& w, const Source<M>& src, const DotKernels& dense, const float* x, int64_t T,
         float* y, ThreadPool& pool) {
  WICK_CHECK(valid(w) && T >= 1, "PackedLinear builds valid packed views");
  DecodedMatrix d;
  d.decode = [](const void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* dst) {
    const auto* s = static_cast<const Source<M>*>(ctx);
    s->decode(*s->w, r0, r1, c0, c1, dst);
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
  d.col_block = 256;  // a superblock (sym's 16-column blocks lie whole within it)
  matmul_decoded(d, x, T, y, dense, pool);
}

// From this many inputs on, the tile (decoding each block of rows' codes once for all inputs)
// beats the GEMV run once per input: on a 3072 x 768 sb6@4 matrix with 2 threads (Zen 4), the
// tile cost ~0.4 ms to set up plus ~20 us per input against ~50 us per input for the GEMV (measured
// before the set-up's transposes made it 1.2-2x faster: the crossover may now be lower). Both
// give the same bits, so the choice changes no result.
constexpr int64_t kInt8TileMinInputs = 13;

// out[t * (cols / width) + b] = the sum of input t's codes in columns [width b, width (b + 1)).
template <class Sum>
Sum* input_block_sums(const Int8Inputs& x, int64_t width, Arena& arena) {
  const int64_t nb = x.cols / width;
  Sum* out = arena.get<Sum>(static_cast<size_t>(x.T * nb), Arena::kCaller1);
  for (int64_t t = 0; t < x.T; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* src = x.codes + t * x.cols + width * b;
      int32_t q = 0;
      for (int64_t e = 0; e < width; ++e) q += src[e];
      out[t * nb + b] = static_cast<Sum>(q);
    }
  return out;
}

// out[t * cols + order(c)] = input t's code of column c: the order a GEMV reads its codes in.
template <class Order>
int8_t* ordered_inputs(const Int8Inputs& x, Order order, Arena& arena) {
  int8_t* out = arena.get<int8_t>(static_cast<size_t>(x.T * x.cols), Arena::kCaller0);
  for (int64_t t = 0; t < x.T; ++t)
    for (int64_t c = 0; c < x.cols; ++c) out[t * x.cols + order(c)] = x.codes[t * x.cols + c];
  return out;
}

// The work split of both layouts: fewer than kInt8TileMinInputs inputs run the GEMV (gemv(r0, r1)
// for every input), more the tile (tile(r0, r1, t0, t1, arena), an item holding tile_bytes).
template <class M, class Gemv, class Tile>
void run_int8(const Int8InputKernels& k, const M& w, const Int8Inputs& x, int64_t tile_bytes,
              Gemv&& gemv, Tile&& tile, ThreadPool& pool) {
  WICK_CHECK(valid(w) && x.T >= 1 && x.cols == w.cols,
             "PackedLinear passes inputs of the matrix's width");
  if (x.T >= kInt8TileMinInputs) {
    work::for_each_gemm_item(w.rows, w.cols, x.T, k.tile_rows, tile_bytes, pool, tile);
    return;
  }
  work::for_each_gemv_block(w.rows, w.cols, x.T, pool,
                            [&](int64_t r0, int64_t r1, Arena&) { gemv(r0, r1); });
}

// sb6: each input's 32-column block sums Q_b as floats (GEMV and tile), and for the GEMV its
// codes in the sb6 order (kernels/qmatmul_impl.h), prepared once on the caller.
void run_int8(const Int8InputKernels& k, const Sb6Matrix& w, const Int8Inputs& x, float* y,
              ThreadPool& pool) {
  WICK_CHECK(w.bits < 5 || !k.sb6_high_bits || w.hb != nullptr,
             "PackedLinear attaches the high bits the active kernels read");
  const int64_t cols = w.cols, T = x.T, nb = cols / 32, nsb = cols / 256;
  Arena& arena = pool.caller_arena();
  const float* sums = input_block_sums<float>(x, 32, arena);
  const int8_t* ordered = T < kInt8TileMinInputs ? ordered_inputs(x, sb6_order, arena) : nullptr;
  // A tile item holds its rows' 32 code bytes and two fp32 scales per 32 columns.
  run_int8(
      k, w, x, nb * (32 + 2 * int64_t{sizeof(float)}),
      [&](int64_t r0, int64_t r1) {
        const auto input = [&](int64_t t) {
          return Sb6Int8Input{ordered + t * cols, sums + t * nb, x.scales + t * nsb};
        };
        for (int64_t t = 0; t < T; t += 2) {  // two inputs per pass share the decoded codes
          const int n = T - t >= 2 ? 2 : 1;
          const Sb6Int8Input in[2] = {input(t), input(t + n - 1)};
          k.sb6(w, r0, r1, in, n, y + t * w.rows + r0, w.rows);
        }
      },
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& a) {
        const Int8Inputs xs{x.codes + t0 * cols, x.scales + t0 * nsb, t1 - t0, cols};
        k.sb6_tile(w, r0, r1, xs, sums + t0 * nb, y + t0 * w.rows + r0, w.rows, a);
      },
      pool);
}

// sym: the tile's codes are biased per instruction set and the sym@6 GEMV sums unsigned codes,
// so each input's 16-column block sums go with them (T x cols additions on the caller, against
// rows x T x cols products); the sym@6 GEMV reads the input's codes in the sym@6 order.
void run_int8(const Int8InputKernels& k, const SymMatrix& w, const Int8Inputs& x, float* y,
              ThreadPool& pool) {
  WICK_CHECK(w.bits != 6 || !k.sym6_high_bits || w.hb != nullptr,
             "PackedLinear attaches the high bits the active kernels read");
  const int64_t cols = w.cols, T = x.T, nb = cols / 16, nsb = cols / 256;
  const bool tile = T >= kInt8TileMinInputs;
  Arena& arena = pool.caller_arena();
  const int32_t* q16 = tile || w.bits == 6 ? input_block_sums<int32_t>(x, 16, arena) : nullptr;
  const int8_t* ordered = !tile && w.bits == 6 ? ordered_inputs(x, sym6_order, arena) : nullptr;
  // A tile item holds its rows' code byte per column and fp32 scale per 16 columns.
  run_int8(
      k, w, x, cols + nb * int64_t{sizeof(float)},
      [&](int64_t r0, int64_t r1) {
        for (int64_t t = 0; t < T; ++t)
          k.sym(w, r0, r1,
                SymInt8Input{x.codes + t * cols, ordered ? ordered + t * cols : nullptr,
                             q16 ? q16 + t * nb : nullptr, x.scales + t * nsb},
                y + t * w.rows + r0);
      },
      [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1, Arena& a) {
        const Int8Inputs xs{x.codes + t0 * cols, x.scales + t0 * nsb, t1 - t0, cols};
        k.sym_tile(w, r0, r1, xs, q16 + t0 * nb, y + t0 * w.rows + r0, w.rows, a);
      },
      pool);
}

}  // namespace

const Int8InputKernels& int8_input_kernels_for(Isa isa) {
  switch (int8_isa(isa)) {
    case IntIsa::kAvx512Vnni:
      return int8_input_kernels_avx512_vnni();
    case IntIsa::kAvx2:
      return int8_input_kernels_avx2();
    case IntIsa::kScalar:
      break;
  }
  return int8_input_kernels_scalar();
}

void qmatmul_int8_inputs_isa(Isa isa, const Sb6Matrix& w, const Int8Inputs& x, float* y,
                             ThreadPool& pool) {
  run_int8(int8_input_kernels_for(isa), w, x, y, pool);
}

void qmatmul_int8_inputs_isa(Isa isa, const SymMatrix& w, const Int8Inputs& x, float* y,
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

void qmatmul_int8_inputs(const SymMatrix& w, const Int8Inputs& x, float* y, ThreadPool& pool) {
  qmat::run_int8(*kernel_table().packed_int8, w, x, y, pool);
}

}  // namespace wick::kernels
