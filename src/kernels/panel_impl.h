// The kernels over weights packed into panels (kernels/panels.h), written once against the dense
// kernels' vector traits (kernels/dot_impl.h) and instantiated per instruction set by
// dot_impl::kernels<V>(). Include only from the files compiled for one ISA (dot_*.cpp).
//
// The summation order is the panels' (panels.h), and the same on every ISA: output (row r,
// input t) is one fp32 chain s = fma(w[r][k], x_t[k], s) for k = 0, 1, ..., cols - 1 from s = +0,
// each step a fused multiply-add (one rounding). A vector holds V::kLanes rows of one k (a panel
// stores its 16 rows' weights of one k next to each other), so no horizontal sum is ever taken:
// the GEMV and the GEMM tile differ only in how many chains run side by side, and an output is
// bit-identical whichever of them computed it, on whichever ISA, in whichever tile position.
//
// Beyond the dot traits' members (dot_impl.h), V provides
//   fused_fma(w, x, acc)    acc + w * x, lane-wise, with one rounding (a fused multiply-add)
//   broadcast(f)            f in every lane
//   kPanelGemvPanels        panels the GEMV runs side by side (independent chains x kLanes rows)
//   kPanelTileVecs          vectors of kLanes rows a GEMM tile holds (a multiple of 16 / kLanes
//                           or a divisor of it: the tile's rows are whole panels or lie in one)
//   kPanelTileInputs        inputs a GEMM tile holds: kPanelTileVecs x kPanelTileInputs
//                           accumulators stay in registers.
//   kVecRegisters           the vector registers the ISA has (whether a tile's weights of a pair
//                           of steps fit beside its accumulators)
//   load_pair(BF16{}, p, even, odd)
//                           kLanes rows of a bf16 panel's pair of steps (2 kLanes elements at p,
//                           row i's two at p[2i], p[2i + 1]): step k as `even`, k + 1 as `odd`
//
// bf16 panels hold their columns in pairs (panels.h): their kernels take two steps of k per load,
// the low halves with x[k] first, then the high halves with x[k + 1] - the same chain, so the same
// bits - and a last odd column alone (its pair's high half is padding and never multiplied).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/dot_impl.h"
#include "kernels/panels.h"

namespace wick::kernels::panel_impl {

constexpr size_t kP = static_cast<size_t>(kPanelRows);

// How far ahead in its own panel the GEMV prefetches each panel's stream into L1, for weights
// whose E::kPrefetch (dot_impl.h) says so: the 16-bit ones. Intel Emerald Rapids, 2 threads,
// BM_PanelGemvFromMemory/bf16 (768 x 768, 768 x 3072, 65536 x 768), two alternating rounds against
// the read probe's 27-28 GB/s: none 21-24 GB/s, 256 bytes 23-25, 512 25-28, 1024 25-30, 2048 into
// L2 21-23, the next group of panels into L2 (as the row-major GEMV does) 21-23; fp32 weights
// (which stream at the probe's rate without it) level. Prefetching changes no result and faults on
// no address.
inline constexpr size_t kPanelPrefetchBytes = 1024;

// Whether panels of E hold their columns in pairs (panels.h panel_pairs: bf16).
template <class E>
inline constexpr bool kPairs = panel_pairs(E::kDtype);

// Elements from the start of a panel's step (or pair of steps) to row i's first element there.
template <class E>
constexpr size_t lane_offset(size_t i) {
  return kPairs<E> ? 2 * i : i;
}

// The stride of E's panels for a matrix of `cols` columns (panels.h panel_cols).
template <class E>
size_t panel_stride(size_t cols) {
  return kP * static_cast<size_t>(panel_cols(static_cast<int64_t>(cols), E::kDtype));
}

// The panels' stream at `at` prefetched kPanelPrefetchBytes ahead. The address is formed as an
// integer: past the last panel it lies beyond the buffer, which a pointer may not point to (a
// prefetch of it faults on nothing).
template <class W>
inline void prefetch_ahead(const W* at) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(at) + kPanelPrefetchBytes), 0, 3);
}

// G whole panels of bf16 pairs at w (panel stride ps) times x: gemv_panels_n below.
template <class V, class E, int G>
inline void gemv_pair_panels_n(const typename E::W* w, size_t ps, const float* x, size_t cols,
                               float* out) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  constexpr int PV = static_cast<int>(kP / L);
  static_assert(2 * kP * sizeof(typename E::W) == dot_impl::kLineBytes,
                "a pair of steps reads one cache line of each panel");
  Vec acc[G][PV];
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < PV; ++v) acc[g][v] = V::zero();
  size_t k = 0;
  for (; k + 2 <= cols; k += 2) {
    if constexpr (E::kPrefetch)
      for (int g = 0; g < G; ++g) prefetch_ahead(w + g * ps + k * kP);
    const Vec xe = V::broadcast(x[k]), xo = V::broadcast(x[k + 1]);
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < PV; ++v) {
        Vec we, wo;
        V::load_pair(E{}, w + g * ps + k * kP + 2 * v * L, we, wo);
        acc[g][v] = V::fused_fma(wo, xo, V::fused_fma(we, xe, acc[g][v]));
      }
  }
  if (k < cols) {  // the last odd column: its pair's low halves only
    const Vec xe = V::broadcast(x[k]);
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < PV; ++v) {
        Vec we, wo;
        V::load_pair(E{}, w + g * ps + k * kP + 2 * v * L, we, wo);
        acc[g][v] = V::fused_fma(we, xe, acc[g][v]);
      }
  }
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < PV; ++v) V::store(out + g * kP + v * L, acc[g][v]);
}

// gemv_panels_n's k-major path.
template <class V, class E, int G>
inline void gemv_kmajor_panels_n(const typename E::W* w, size_t ps, const float* x, size_t cols,
                                 float* out) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  constexpr int PV = static_cast<int>(kP / L);  // vectors per panel row step
  static_assert(kP % L == 0, "a panel's 16 rows are whole vectors");
  Vec acc[G][PV];
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < PV; ++v) acc[g][v] = V::zero();
  const auto step = [&](size_t k) {
    const Vec xb = V::broadcast(x[k]);
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < PV; ++v)
        acc[g][v] = V::fused_fma(V::load(E{}, w + g * ps + k * kP + v * L), xb, acc[g][v]);
  };
  size_t k = 0;
  if constexpr (E::kPrefetch) {
    // S steps of k fill one cache line of a panel; each line's worth prefetches the line
    // kPanelPrefetchBytes further on in every panel of the group.
    constexpr size_t kStepBytes = kP * sizeof(typename E::W);
    constexpr size_t S = std::max<size_t>(1, dot_impl::kLineBytes / kStepBytes);
    for (; k + S <= cols; k += S) {
      for (int g = 0; g < G; ++g) prefetch_ahead(w + g * ps + k * kP);
      for (size_t s = 0; s < S; ++s) step(k + s);
    }
  }
  for (; k < cols; ++k) step(k);
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < PV; ++v) V::store(out + g * kP + v * L, acc[g][v]);
}

// G whole panels at w (E elements, panel stride ps) times x: out[16 g + i] for g < G, i < 16.
template <class V, class E, int G>
inline void gemv_panels_n(const typename E::W* w, size_t ps, const float* x, size_t cols,
                          float* out) {
  if constexpr (kPairs<E>)
    gemv_pair_panels_n<V, E, G>(w, ps, x, cols, out);
  else
    gemv_kmajor_panels_n<V, E, G>(w, ps, x, cols, out);
}

// y[r] = w_r . x for r < rows (PanelGemv, panels.h): the panels from w, V::kPanelGemvPanels at a
// time, then the rest one by one; the rows past `rows` in the last panel are computed, not stored.
template <class V, class E>
void gemv(const typename E::W* w, size_t cols, const float* x, int64_t rows, float* y) {
  constexpr int G = V::kPanelGemvPanels;
  constexpr int64_t kGroupRows = G * kPanelRows;
  const size_t ps = panel_stride<E>(cols);
  int64_t r = 0;
  for (; r + kGroupRows <= rows; r += kGroupRows, w += G * ps)
    gemv_panels_n<V, E, G>(w, ps, x, cols, y + r);
  for (; r < rows; r += kPanelRows, w += ps) {
    alignas(64) float out[kP];
    gemv_panels_n<V, E, 1>(w, ps, x, cols, out);
    std::copy_n(out, std::min<int64_t>(kPanelRows, rows - r), y + r);
  }
}

// One tile: RV vectors of rows (RV * kLanes rows from the panels at w, panel stride ps) x NT
// inputs (x + t * xs), over nk steps of k: y[t * ys + i] for i < RV * kLanes, starting from the
// values in y when `accumulate` (a later block of k), else from +0.
template <class V, class E, int RV, int NT>
inline void tile_n(const typename E::W* w, size_t ps, const float* x, size_t xs, size_t nk,
                   float* y, size_t ys, bool accumulate) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  Vec acc[RV][NT];
  for (int j = 0; j < RV; ++j)
    for (int t = 0; t < NT; ++t)
      acc[j][t] = accumulate ? V::load(dot_impl::F32{}, y + t * ys + j * L) : V::zero();
  // Vector j of the tile: rows j * L .. of panel j * L / 16, at lane offset j * L % 16.
  const typename E::W* wj[RV];
  for (int j = 0; j < RV; ++j) wj[j] = w + (j * L) / kP * ps + lane_offset<E>((j * L) % kP);
  size_t k = 0;
  if constexpr (kPairs<E>) {
    // Two steps per load of a pair. With room for RV weight vectors beside the accumulators, a
    // broadcast and a constant, each input is broadcast once per step for the whole tile: the
    // low halves of the RV vectors, then (their pairs loaded again, from L1) the high halves -
    // holding both halves at once spilled AVX-512's 3 x 8 accumulators to the stack. Else vector
    // by vector, broadcasting the inputs again for each.
    constexpr bool kHold = RV + RV * NT + 2 <= V::kVecRegisters;
    for (; k + 2 <= nk; k += 2) {
      if constexpr (E::kPrefetch)
        for (int j = 0; j < RV; j += kPanelRows / static_cast<int>(L))
          prefetch_ahead(wj[j] + k * kP);
      if constexpr (kHold) {
        Vec wv[RV], unused;
        for (int j = 0; j < RV; ++j) V::load_pair(E{}, wj[j] + k * kP, wv[j], unused);
        for (int t = 0; t < NT; ++t) {
          const Vec xb = V::broadcast(x[t * xs + k]);
          for (int j = 0; j < RV; ++j) acc[j][t] = V::fused_fma(wv[j], xb, acc[j][t]);
        }
        for (int j = 0; j < RV; ++j) V::load_pair(E{}, wj[j] + k * kP, unused, wv[j]);
        for (int t = 0; t < NT; ++t) {
          const Vec xb = V::broadcast(x[t * xs + k + 1]);
          for (int j = 0; j < RV; ++j) acc[j][t] = V::fused_fma(wv[j], xb, acc[j][t]);
        }
      } else {
        for (int j = 0; j < RV; ++j) {
          Vec we, wo;
          V::load_pair(E{}, wj[j] + k * kP, we, wo);
          for (int t = 0; t < NT; ++t) {
            acc[j][t] = V::fused_fma(we, V::broadcast(x[t * xs + k]), acc[j][t]);
            acc[j][t] = V::fused_fma(wo, V::broadcast(x[t * xs + k + 1]), acc[j][t]);
          }
        }
      }
    }
    if (k < nk) {  // the last odd column: its pair's low halves only
      for (int j = 0; j < RV; ++j) {
        Vec we, wo;
        V::load_pair(E{}, wj[j] + k * kP, we, wo);
        for (int t = 0; t < NT; ++t)
          acc[j][t] = V::fused_fma(we, V::broadcast(x[t * xs + k]), acc[j][t]);
      }
      k = nk;
    }
  }
  for (; k < nk; ++k) {
    // 16-bit k-major panels (fp16): each panel's stream ahead as in the GEMV, once per line.
    if constexpr (E::kPrefetch && !kPairs<E>) {
      constexpr size_t S = std::max<size_t>(1, dot_impl::kLineBytes / (kP * sizeof(typename E::W)));
      if (k % S == 0)
        for (int j = 0; j < RV; j += kPanelRows / static_cast<int>(L))
          prefetch_ahead(wj[j] + k * kP);
    }
    Vec wv[RV];
    for (int j = 0; j < RV; ++j) wv[j] = V::load(E{}, wj[j] + k * kP);
    for (int t = 0; t < NT; ++t) {
      const Vec xb = V::broadcast(x[t * xs + k]);
      for (int j = 0; j < RV; ++j) acc[j][t] = V::fused_fma(wv[j], xb, acc[j][t]);
    }
  }
  for (int j = 0; j < RV; ++j)
    for (int t = 0; t < NT; ++t) V::store(y + t * ys + j * L, acc[j][t]);
}

// RV vectors of rows x the last nt (< K + 1) inputs.
template <class V, class E, int RV, int K>
inline void tile_inputs_rest(const typename E::W* w, size_t ps, const float* x, size_t xs,
                             size_t nk, int nt, float* y, size_t ys, bool accumulate) {
  if constexpr (K > 0) {
    if (nt == K) return tile_n<V, E, RV, K>(w, ps, x, xs, nk, y, ys, accumulate);
    tile_inputs_rest<V, E, RV, K - 1>(w, ps, x, xs, nk, nt, y, ys, accumulate);
  }
}

// RV vectors of rows x any number of inputs, V::kPanelTileInputs at a time.
template <class V, class E, int RV>
inline void tile_rows(const typename E::W* w, size_t ps, const float* x, size_t xs, size_t nk,
                      int nt, float* y, size_t ys, bool accumulate) {
  constexpr int T = V::kPanelTileInputs;
  for (; nt >= T; x += T * xs, y += T * ys, nt -= T)
    tile_n<V, E, RV, T>(w, ps, x, xs, nk, y, ys, accumulate);
  tile_inputs_rest<V, E, RV, T - 1>(w, ps, x, xs, nk, nt, y, ys, accumulate);
}

// The last rv (< K + 1) vectors of rows.
template <class V, class E, int K>
inline void tile_rows_rest(const typename E::W* w, size_t ps, const float* x, size_t xs, size_t nk,
                           int rv, int nt, float* y, size_t ys, bool accumulate) {
  if constexpr (K > 0) {
    if (rv == K) return tile_rows<V, E, K>(w, ps, x, xs, nk, nt, y, ys, accumulate);
    tile_rows_rest<V, E, K - 1>(w, ps, x, xs, nk, rv, nt, y, ys, accumulate);
  }
}

// PanelTile (panels.h): rows [0, nr) of the panels at w x inputs [0, nt), one block of nk steps of
// k, V::kPanelTileVecs vectors of rows x V::kPanelTileInputs inputs at a time. Rows past nr in
// the last panel are computed in a local copy of their outputs and not stored.
template <class V, class E>
void tile(const typename E::W* w, size_t ps, const float* x, size_t xs, size_t nk, int64_t nr,
          int nt, float* y, size_t ys, bool accumulate) {
  constexpr int RV = V::kPanelTileVecs;
  constexpr int64_t L = static_cast<int64_t>(V::kLanes);
  constexpr int64_t kTileRows = RV * L;
  static_assert(kTileRows % kPanelRows == 0 || kPanelRows % kTileRows == 0,
                "a tile's rows are whole panels or lie in one panel");
  // Vectors of rows: whole tiles, then the whole vectors left.
  const auto at = [&](int64_t r) {
    return w + r / kPanelRows * ps + lane_offset<E>(static_cast<size_t>(r % kPanelRows));
  };
  int64_t r = 0;
  for (; r + kTileRows <= nr; r += kTileRows)
    tile_rows<V, E, RV>(at(r), ps, x, xs, nk, nt, y + r, ys, accumulate);
  const int rv = static_cast<int>((nr - r) / L);
  if (rv > 0) {
    tile_rows_rest<V, E, RV - 1>(at(r), ps, x, xs, nk, rv, nt, y + r, ys, accumulate);
    r += rv * L;
  }
  if (r == nr) return;
  // The last partial vector of rows: its lanes past nr exist in the panel (zero rows) but not in
  // y, so it runs on a copy of its outputs, one input at a time.
  const int64_t left = nr - r;
  for (int t = 0; t < nt; ++t) {
    alignas(64) float out[L];
    std::fill_n(out, L, 0.0f);
    if (accumulate) std::copy_n(y + t * ys + r, left, out);
    tile_rows_rest<V, E, 1>(at(r), ps, x + t * xs, xs, nk, 1, 1, out, 0, accumulate);
    std::copy_n(out, left, y + t * ys + r);
  }
}

// A block of bf16 panels' pairs as fp32 in the k-major order of fp32 panels (panels.h), for the
// GEMM's widened blocks: n elements of src (whole pairs of steps: a multiple of 32) to n floats,
// dst[k * 16 + i] = w(i, k) - each pair's low halves to its step k, the high halves to k + 1.
template <class V>
void widen_pairs(const uint16_t* src, float* dst, size_t n) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  for (size_t i = 0; i < n; i += 2 * kP)
    for (size_t v = 0; v < kP; v += L) {
      Vec we, wo;
      V::load_pair(dot_impl::BF16{}, src + i + 2 * v, we, wo);
      V::store(dst + i + v, we);
      V::store(dst + i + kP + v, wo);
    }
}

}  // namespace wick::kernels::panel_impl
