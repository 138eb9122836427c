// The loops of the vector decoders of packed codes (kernels/qmatmul_impl.h Kernels), written once
// for qmatmul_avx2.cpp and qmatmul_avx512.cpp against their dense vector trait V
// (kernels/dot_avx2_trait.h, kernels/dot_avx512_trait.h) and their formats' code decoders Fmt:
//
//   decode_rows   a block of W (rows x a range of whole superblocks of columns) as fp32 (the
//                 GEMM's blocks and the scalar-free GEMV fallback)
//   gemv          y[r] = W[r] . x with the codes decoded in registers and never stored: the
//                 dense GEMV's summation order exactly (kernels/dot_impl.h: one accumulator per
//                 row over chunks of V::kLanes in column order, V::fma, then V::reduce), so it
//                 gives the bits of dense.f32 on the decoded row - and of the GEMM over decoded
//                 blocks - while it reads only the codes.
//
// Fmt provides: using Matrix; init(w, r) (row r's streams); superblock(j) (the scales of the
// 256 columns of superblock j); weights(i, u, Vec* w) (unit u = 8j + i, its 32 columns as
// kParts = 32 / V::kLanes vectors of dequantised fp32 weights in column order, exactly as the
// dequantiser rounds them); kGemvRows (how many rows the fused GEMV interleaves, measured per
// instruction set and layout). packed_kernels<V, Sb6, Sym>() builds an instruction set's table
// from its format templates. Each including file gets its own copy (unnamed namespace).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/dot_impl.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/qmatmul_row_state.h"

namespace wick::kernels::qmat {
namespace {

template <class V>
constexpr int kParts = static_cast<int>(32 / V::kLanes);

// Rows [r0, r1) x columns [c0, c1) (whole superblocks; Kernels::decode_sb6).
template <class V, class Fmt>
void decode_rows(const typename Fmt::Matrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                 float* out) {
  using Vec = typename V::Vec;
  const int64_t width = c1 - c0;
  for (int64_t r = r0; r < r1; ++r) {
    Fmt fmt;
    fmt.init(w, r);
    float* o = out + (r - r0) * width;  // column c at o[c - c0]
    for (int64_t j = c0 / 256; j < c1 / 256; ++j) {
      fmt.superblock(j);
      for (int i = 0; i < 8; ++i) {
        const int64_t u = 8 * j + i;
        Vec wv[kParts<V>];
        fmt.weights(i, u, wv);
        for (int p = 0; p < kParts<V>; ++p) V::store(o + (32 * u - c0) + p * V::kLanes, wv[p]);
      }
    }
  }
}

// Rows r, r + rs, ..., r + (NR - 1) rs (NR code streams interleaved, independent FMA chains);
// output k to y[k * ys].
template <class V, class Fmt, int NR>
inline void gemv_n(const typename Fmt::Matrix& w, int64_t r, int64_t rs, const float* x, float* y,
                   int64_t ys) {
  using Vec = typename V::Vec;
  constexpr int P = kParts<V>;
  const int64_t nsb = w.cols / 256;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  Vec acc[NR];
  for (int k = 0; k < NR; ++k) acc[k] = V::zero();
  for (int64_t j = 0; j < nsb; ++j) {
    for (int k = 0; k < NR; ++k) fmt[k].superblock(j);
    for (int i = 0; i < 8; ++i) {
      const int64_t u = 8 * j + i;
      Vec xv[P];
      for (int p = 0; p < P; ++p) xv[p] = V::load(dot_impl::F32{}, x + 32 * u + p * V::kLanes);
      for (int k = 0; k < NR; ++k) {
        Vec wv[P];
        fmt[k].weights(i, u, wv);
        for (int p = 0; p < P; ++p) acc[k] = V::fma(wv[p], xv[p], acc[k]);
      }
    }
  }
  for (int k = 0; k < NR; ++k) y[k * ys] = V::reduce(acc[k]);
}

// y[r - r0] = W[r] . x for r in [r0, r1): NR rows at a time, taken from NR equal parts of the
// range, the rest one by one. Rows far apart are NR separate code streams for the memory system:
// on the 65536 x 768 head read from memory, NR adjacent rows streamed at ~60 % of the speed of
// rows from the four quarters of a 64-row block (which matches the previous kernel's two halves).
template <class V, class Fmt, int NR>
void gemv(const typename Fmt::Matrix& w, int64_t r0, int64_t r1, const float* x, float* y) {
  const int64_t h = (r1 - r0) / NR;
  for (int64_t i = 0; i < h; ++i) gemv_n<V, Fmt, NR>(w, r0 + i, h, x, y + i, h);
  for (int64_t r = r0 + NR * h; r < r1; ++r) gemv_n<V, Fmt, 1>(w, r, 0, x, y + (r - r0), 0);
}

// Calls F::template run<Fmt<bits>> for the bit width of w: sb6 4/5/6, sym 6/8 (the loader admits
// no other, quant/rwkvq_reader.cpp).
template <template <int> class Fmt, class F, class M, class... A>
void by_bits(const M& w, A... a) {
  if constexpr (std::is_same_v<M, Sb6Matrix>) {
    switch (w.bits) {
      case 4:
        return F::template run<Fmt<4>>(w, a...);
      case 5:
        return F::template run<Fmt<5>>(w, a...);
      default:
        return F::template run<Fmt<6>>(w, a...);
    }
  } else {
    if (w.bits == 8) return F::template run<Fmt<8>>(w, a...);
    return F::template run<Fmt<6>>(w, a...);
  }
}

template <class V>
struct DecodeRows {
  template <class Fmt, class M>
  static void run(const M& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
    decode_rows<V, Fmt>(w, r0, r1, c0, c1, out);
  }
};
template <class V>
struct FusedGemv {
  template <class Fmt, class M>
  static void run(const M& w, int64_t r0, int64_t r1, const float* x, float* y) {
    gemv<V, Fmt, Fmt::kGemvRows>(w, r0, r1, x, y);
  }
};

// The table of the instruction set whose dense trait is V and whose formats are Sb6<bits> and
// Sym<bits>, named V::kName.
template <class V, template <int> class Sb6, template <int> class Sym>
const Kernels& packed_kernels() {
  static const Kernels k{[](const Sb6Matrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            float* out) { by_bits<Sb6, DecodeRows<V>>(w, r0, r1, c0, c1, out); },
                         [](const SymMatrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            float* out) { by_bits<Sym, DecodeRows<V>>(w, r0, r1, c0, c1, out); },
                         [](const Sb6Matrix& w, int64_t r0, int64_t r1, const float* x, float* y) {
                           by_bits<Sb6, FusedGemv<V>>(w, r0, r1, x, y);
                         },
                         [](const SymMatrix& w, int64_t r0, int64_t r1, const float* x, float* y) {
                           by_bits<Sym, FusedGemv<V>>(w, r0, r1, x, y);
                         },
                         unpack_sb6_scales_f16c,
                         repack_sb6_high_bits_avx2,
                         repack_sym6_high_bits_avx2,
                         V::kName};
  return k;
}

}  // namespace
}  // namespace wick::kernels::qmat
