// The dense dot / GEMV / GEMM-tile / widening kernels of kernels/dot.h, written once. Each
// instruction set's file (dot_scalar.cpp, dot_avx2.cpp, dot_avx512.cpp) defines a small vector
// trait V in its own anonymous namespace and calls dot_impl::kernels<V>(), which instantiates
// everything below with that ISA's compiler flags (the pattern of CTranslate2's cpu/vec.h +
// kernels.cc). Every function here is a template on V, so each ISA's instantiations are its own
// (internal linkage through V); nothing compiled for AVX-512 can be picked by the linker for a
// caller on another ISA. Include only from the files compiled for one ISA (dot_*.cpp, the packed
// decoders' kernels/qmatmul_decode_impl.h, whose fused GEMV follows the same order, and the WKV
// head's kernels/wkv7_impl.h, which uses the same traits).
//
// One summation order per ISA, everywhere: each (weight row, input) pair accumulates its products
// in one accumulator of V::kLanes fp32 lanes, kLanes elements at a time in order (the last,
// partial chunk zero-padded), and V::reduce then adds the lanes in a fixed tree. The single dot,
// the multi-row GEMV and the GEMM tile all follow it, so an output is bit-identical whichever
// kernel computed it, whatever the row count, the row's position in its group, or the thread
// that ran it. Independent dependency chains come from several rows (GEMV: V::kGemvRows rows
// interleaved) or rows x inputs (GEMM tile: V::kTileRows x V::kTileInputs), which hides the FMA
// latency.
//
// The vector trait V provides (all static):
//   Vec, Tail               the register type; the state of a partial last chunk
//   kLanes                  fp32 lanes of a Vec
//   kGemvRows               rows the GEMV interleaves (its register budget)
//   kTileRows, kTileInputs  the GEMM tile's register blocking
//   zero()                  all lanes +0
//   tail(left)              the Tail of a chunk of `left` (1 .. kLanes - 1) elements
//   load(E{}, p)            kLanes elements of dtype E (F32 / F16 / BF16 below) as exact fp32
//   load_tail(E{}, p, t)    the same for a partial chunk, zero in the lanes past its end
//   fma(w, x, acc)          acc + w * x, lane-wise (fused or not: the ISA's choice, fixed)
//   reduce(v)               the sum of the lanes, in the ISA's fixed order
//   reduce4(a, b, c, d, y)  y[0..3] = reduce(a), reduce(b), reduce(c), reduce(d), bit for bit (an
//                           ISA may share the shuffles of the four trees)
//   store(p, v), store_tail(p, v, t)
//   kLaneMajorGemm          whether fma() is fused and reduce() a halving tree (reduce_lanes)
//   add(a, b)               a + b, lane-wise (kLaneMajorGemm traits)
//   transpose_lanes         optional: DotKernels::transpose_lanes
// and, for the WKV head written against the same traits (kernels/wkv7_impl.h), kWkvRows, mul,
// sub and broadcast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/dot.h"
#include "wick/dtype.h"

namespace wick::kernels::dot_impl {

// Stored weight dtypes (tags for V::load). kPrefetch: whether the GEMVs prefetch for weights of
// this dtype (the row-major one the next group of rows, gemv_rows_n; the panel GEMV each panel's
// own stream ahead, panel_impl.h). For the row-major GEMV: measured on an AVX-512 Xeon (480 MiB L3,
// one thread, CPU time, medians of 5): it lifts the 65536 x 768 head from memory from 7.8 to 9.4
// GB/s (bf16) and 8.0 to 8.8 (fp16) with AVX-512, but costs fp32 weights, whose rows are twice as
// long and which the hardware prefetcher follows on its own (14.1 -> 11.6 GB/s). The row-major
// GEMV's prefetch goes to L2 (prefetcht1), not L1: on a Zen 4 (2 threads, 0.1B decode, three
// alternating rounds) that took a bf16 step from 15.9-17.9 to 12.7-14.3 ms and an fp16 one
// from 15.5-15.9 to 12.5-12.9, and the AVX2 build's from 13.2-13.6 to 12.3 - the lines arrive
// without taking L1 fill buffers from the loads of the rows being summed. fp32 weights measured the
// same with or without it there, so they keep none.
struct F32 {
  using W = float;
  static constexpr DType kDtype = DType::F32;
  static constexpr bool kPrefetch = false;
};
struct F16 {
  using W = uint16_t;
  static constexpr DType kDtype = DType::F16;
  static constexpr bool kPrefetch = true;
};
struct BF16 {
  using W = uint16_t;
  static constexpr DType kDtype = DType::BF16;
  static constexpr bool kPrefetch = true;
};

// Bytes one prefetch instruction covers (a cache line).
constexpr size_t kLineBytes = 64;

// The step of NR rows at element i, one group of rows ahead: prefetches into L2 (see F32 above)
// the bytes that NR rows' step of L elements covers, from `next` onwards (nothing without next).
// The addresses are formed as integers: after the last group, `next` is the end of the matrix and
// what lies past it is no object a pointer may point into (a prefetch of it faults on nothing).
template <class E, int NR, size_t L>
inline void prefetch_step(const char* next, size_t i) {
  if (next == nullptr) return;
  constexpr size_t kRowBytes = NR * sizeof(typename E::W);  // NR rows' bytes per element
  const uintptr_t at = reinterpret_cast<uintptr_t>(next) + i * kRowBytes;
  for (size_t b = 0; b < L * kRowBytes; b += kLineBytes)
    __builtin_prefetch(reinterpret_cast<const void*>(at + b), 0, 2);
}

// y[r] = V::reduce(acc[r]) for r < N: four at a time through V::reduce4, the rest alone.
template <class V, int N>
inline void reduce_n(const typename V::Vec* acc, float* y) {
  int r = 0;
  for (; r + 4 <= N; r += 4) V::reduce4(acc[r], acc[r + 1], acc[r + 2], acc[r + 3], y + r);
  for (; r < N; ++r) y[r] = V::reduce(acc[r]);
}

// In every kernel below, E is the weights' element tag and X the inputs' (F32 but for the bf16
// dot product of V = the AVX-512 BF16 trait, where both are BF16 and a step multiplies pairs).

// NR rows of W (row stride `stride` elements) times x, n elements each: y[r] = w_r . x.
// `next`, when given, is where the rows after these begin: while the NR rows stream, the same
// number of bytes from there is prefetched, one group of rows ahead of the hardware prefetcher,
// which ramps up slowly on many short interleaved row streams (measured: the 65536 x 768 bf16
// head GEMV read at ~55 % of the bandwidth without it), into L2 (see F32 above). Prefetching
// changes no result.
template <class V, class E, class X, int NR>
inline void gemv_rows_n(const typename E::W* w, size_t stride, const typename X::W* x, size_t n,
                        float* y, const char* next) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  Vec acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = V::zero();
  size_t i = 0;
  for (; i + L <= n; i += L) {
    prefetch_step<E, NR, L>(next, i);
    const auto xv = V::load(X{}, x + i);
    for (int r = 0; r < NR; ++r) acc[r] = V::fma(V::load(E{}, w + r * stride + i), xv, acc[r]);
  }
  if (i < n) {
    const typename V::Tail t = V::tail(n - i);
    const auto xv = V::load_tail(X{}, x + i, t);
    for (int r = 0; r < NR; ++r)
      acc[r] = V::fma(V::load_tail(E{}, w + r * stride + i, t), xv, acc[r]);
  }
  reduce_n<V, NR>(acc, y);
}

// The last nr (< K + 1) rows of a GEMV: one call of the K-row kernel that fits.
template <class V, class E, class X, int K>
inline void gemv_rows_rest(const typename E::W* w, size_t stride, const typename X::W* x, size_t n,
                           int nr, float* y) {
  if constexpr (K > 0) {
    if (nr == K) return gemv_rows_n<V, E, X, K>(w, stride, x, n, y, nullptr);
    gemv_rows_rest<V, E, X, K - 1>(w, stride, x, n, nr, y);
  }
}

// y[r] = w_r . x for r < nr, V::kGemvRows rows at a time.
template <class V, class E, class X = F32>
void gemv_rows(const typename E::W* w, size_t stride, const typename X::W* x, size_t n, int nr,
               float* y) {
  constexpr int R = V::kGemvRows;
  for (; nr >= R; w += R * stride, y += R, nr -= R)
    gemv_rows_n<V, E, X, R>(w, stride, x, n, y,
                            E::kPrefetch ? reinterpret_cast<const char*>(w + R * stride) : nullptr);
  gemv_rows_rest<V, E, X, R - 1>(w, stride, x, n, nr, y);
}

template <class V, class E>
float dot(const typename E::W* w, const float* x, size_t n) {
  float y;
  gemv_rows_n<V, E, F32, 1>(w, 0, x, n, &y, nullptr);
  return y;
}

// Rows at least this long (fp32 elements) are "long" for the fp32 GEMM tile: a tile's rows and
// inputs (4 x 6 on AVX-512: 10 streams of 8 KiB or more) no longer fit L1 together, and every
// step reads them from L2. For such rows the tile prefetches each of its streams kRowAheadBytes
// ahead into L1 once per cache line. Intel Emerald Rapids, 2 threads, BM_Gemm/f32/768/3072/512
// (the 0.1B FFN's value matrix as a .rwkvq prefill runs it over decoded rows), two alternating
// rounds: 155-162 -> 174-179 GFLOP/s (512 bytes ahead the same); 768-column rows (whose tile of
// inputs stays in L1) are left without it. Prefetching changes no result.
constexpr size_t kLongRow = 2048;
constexpr size_t kRowAheadBytes = 1024;

// The NR rows' and NT inputs' streams at element i (one chunk: a cache line each for fp32 and
// 16 lanes), prefetched kRowAheadBytes ahead into L1; the addresses formed as integers (past the
// last chunk they lie beyond the rows).
template <int NR, int NT, size_t L>
inline void prefetch_streams(const float* w, size_t ws, const float* x, size_t xs, size_t i) {
  const auto ahead = [](const float* p) {
    __builtin_prefetch(
        reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kRowAheadBytes), 0, 3);
  };
  for (int r = 0; r < NR; ++r) ahead(w + r * ws + i);
  for (int t = 0; t < NT; ++t) ahead(x + t * xs + i);
}

// NR weight rows x NT inputs: y[t * ys + r] = w_r . x_t. `next`, when given, is prefetched into
// L2 as in gemv_rows_n (NR rows' worth of bytes from there, spread over the steps); long fp32 rows
// prefetch their own streams into L1 (kLongRow).
template <class V, class E, class X, int NR, int NT>
inline void gemm_tile_n(const typename E::W* w, size_t ws, const typename X::W* x, size_t xs,
                        size_t n, float* y, size_t ys, const char* next) {
  using Vec = typename V::Vec;
  using WVec = decltype(V::load(E{}, w));
  constexpr size_t L = V::kLanes;
  // The shape of this function is for the register allocator. With one loop that may run zero
  // times, a masked last chunk after it and one reduction where the paths meet, GCC 12 keeps the
  // NR x NT accumulators in a stack array: the AVX-512 4 x 6 tile stored 24 zero vectors on entry
  // and stored and reloaded all 24 around the reduction on every call (~19 % of the tile's
  // samples outside its loop in a prefill profile on an Intel Ice Lake). So a single partial chunk
  // is run zero-padded to a whole one (the same bits as the masked loads: the lanes past the end
  // add +0), the loop below always runs at least once, and each exit has its own reduction.
  if (n < L) {  // n = 0 included: every lane adds +0, so each output is +0
    alignas(64) typename E::W pw[NR][L] = {};
    alignas(64) typename X::W px[NT][L] = {};
    for (int r = 0; r < NR; ++r)
      for (size_t j = 0; j < n; ++j) pw[r][j] = w[r * ws + j];
    for (int t = 0; t < NT; ++t)
      for (size_t j = 0; j < n; ++j) px[t][j] = x[t * xs + j];
    return gemm_tile_n<V, E, X, NR, NT>(&pw[0][0], L, &px[0][0], L, L, y, ys, nullptr);
  }
  Vec acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = V::zero();
  const auto finish = [&] {  // the reduction, in the order of the header comment
    for (int t = 0; t < NT; ++t) {
      Vec col[NR];
      for (int r = 0; r < NR; ++r) col[r] = acc[r][t];
      reduce_n<V, NR>(col, y + t * ys);
    }
  };
  size_t i = 0;
  do {
    prefetch_step<E, NR, L>(next, i);
    if constexpr (std::is_same_v<E, F32> && std::is_same_v<X, F32>)
      if (n >= kLongRow) prefetch_streams<NR, NT, L>(w, ws, x, xs, i);
    WVec wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = V::load(E{}, w + r * ws + i);
    for (int t = 0; t < NT; ++t) {
      const auto xv = V::load(X{}, x + t * xs + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
    }
    i += L;
  } while (i + L <= n);
  if (i == n) return finish();
  const typename V::Tail tl = V::tail(n - i);  // the partial last chunk, masked
  WVec wv[NR];
  for (int r = 0; r < NR; ++r) wv[r] = V::load_tail(E{}, w + r * ws + i, tl);
  for (int t = 0; t < NT; ++t) {
    const auto xv = V::load_tail(X{}, x + t * xs + i, tl);
    for (int r = 0; r < NR; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
  }
  finish();
}

// NR rows x the last nt (< K + 1) inputs.
template <class V, class E, class X, int NR, int K>
inline void gemm_tile_inputs_rest(const typename E::W* w, size_t ws, const typename X::W* x,
                                  size_t xs, size_t n, int nt, float* y, size_t ys,
                                  const char* next) {
  if constexpr (K > 0) {
    if (nt == K) return gemm_tile_n<V, E, X, NR, K>(w, ws, x, xs, n, y, ys, next);
    gemm_tile_inputs_rest<V, E, X, NR, K - 1>(w, ws, x, xs, n, nt, y, ys, next);
  }
}

// NR rows x any number of inputs, V::kTileInputs at a time; `next` is prefetched while the first
// tile of inputs passes over the rows (the later ones find the rows in cache).
template <class V, class E, class X, int NR>
void gemm_tile_rows(const typename E::W* w, size_t ws, const typename X::W* x, size_t xs, size_t n,
                    int nt, float* y, size_t ys, const char* next) {
  constexpr int T = V::kTileInputs;
  for (; nt >= T; x += T * xs, y += T * ys, nt -= T, next = nullptr)
    gemm_tile_n<V, E, X, NR, T>(w, ws, x, xs, n, y, ys, next);
  gemm_tile_inputs_rest<V, E, X, NR, T - 1>(w, ws, x, xs, n, nt, y, ys, next);
}

// The last nr (< K + 1) rows of a tile.
template <class V, class E, class X, int K>
inline void gemm_tile_rows_rest(const typename E::W* w, size_t ws, const typename X::W* x,
                                size_t xs, size_t n, int nr, int nt, float* y, size_t ys,
                                const char* next) {
  if constexpr (K > 0) {
    if (nr == K) return gemm_tile_rows<V, E, X, K>(w, ws, x, xs, n, nt, y, ys, next);
    gemm_tile_rows_rest<V, E, X, K - 1>(w, ws, x, xs, n, nr, nt, y, ys, next);
  }
}

// Any nr x nt, V::kTileRows x V::kTileInputs at a time (dot.h: GemmTile, Bf16GemmTile). With
// `next` (where the rows after these nr begin), each group of rows prefetches the group after it
// while the first tile of inputs passes over it - one group ahead, as the GEMV does: the next
// group of these rows when a whole one follows (a shorter last group is not prefetched: the
// amount prefetched is one group's), `next` after the last group.
template <class V, class E = F32, class X = F32>
void gemm_tile(const typename E::W* w, size_t ws, const typename X::W* x, size_t xs, size_t n,
               int nr, int nt, float* y, size_t ys, const void* next) {
  constexpr int R = V::kTileRows;
  // What the group of rows at w prefetches, `left` rows following it.
  const auto ahead = [&](int left) -> const char* {
    if (next == nullptr) return nullptr;                   // the caller asked for none
    if (left == 0) return static_cast<const char*>(next);  // the last group: the caller's rows
    if (left >= R) return reinterpret_cast<const char*>(w + R * ws);  // a whole group follows
    return nullptr;  // only a shorter group follows: not prefetched
  };
  for (; nr >= R; w += R * ws, y += R, nr -= R)
    gemm_tile_rows<V, E, X, R>(w, ws, x, xs, n, nt, y, ys, ahead(nr - R));
  gemm_tile_rows_rest<V, E, X, R - 1>(w, ws, x, xs, n, nr, nt, y, ys, ahead(0));
}

// DotKernels::reduce_lanes for a trait with kLaneMajorGemm: its halving tree (lane j adds lane
// j + kLanes / 2, and so on down to lane 0 + lane 1), kLanes outputs at a time, one per lane.
template <class V, bool kTail>
inline void reduce_lanes_step(const float* p, size_t stride, float* y, typename V::Tail t) {
  using Vec = typename V::Vec;
  constexpr size_t L = V::kLanes;
  Vec s[L];
  for (size_t j = 0; j < L; ++j)
    s[j] = kTail ? V::load_tail(F32{}, p + j * stride, t) : V::load(F32{}, p + j * stride);
  for (size_t h = L / 2; h >= 1; h /= 2)
    for (size_t j = 0; j < h; ++j) s[j] = V::add(s[j], s[j + h]);
  if constexpr (kTail)
    V::store_tail(y, s[0], t);
  else
    V::store(y, s[0]);
}
template <class V>
void reduce_lanes(const float* p, size_t stride, size_t count, float* y) {
  constexpr size_t L = V::kLanes;
  size_t i = 0;
  for (; i + L <= count; i += L) reduce_lanes_step<V, false>(p + i, stride, y + i, V::tail(1));
  if (i < count) reduce_lanes_step<V, true>(p + i, stride, y + i, V::tail(count - i));
}
template <class V>
constexpr ReduceLanes lane_reducer() {
  if constexpr (V::kLaneMajorGemm)
    return reduce_lanes<V>;
  else
    return nullptr;
}

// DotKernels::transpose_lanes: the trait's own, where it has one.
template <class V>
constexpr TransposeLanes lane_transposer() {
  if constexpr (requires { V::transpose_lanes; })
    return V::transpose_lanes;
  else
    return nullptr;
}

// dst[i] = src[i] as fp32 (exact), i < n.
template <class V, class E>
void widen(const typename E::W* src, float* dst, size_t n) {
  constexpr size_t L = V::kLanes;
  size_t i = 0;
  for (; i + L <= n; i += L) V::store(dst + i, V::load(E{}, src + i));
  if (i < n) {
    const typename V::Tail t = V::tail(n - i);
    V::store_tail(dst + i, V::load_tail(E{}, src + i, t), t);
  }
}

// The bf16 x bf16 table of a trait whose load(BF16, p) gives a step of pairs (kernels/dot.h).
template <class V>
const Bf16DotKernels& bf16_kernels() {
  static const Bf16DotKernels k{gemv_rows<V, BF16, BF16>,
                                gemm_tile<V, BF16, BF16>,
                                V::pack,
                                V::kTileRows,
                                V::kTileInputs,
                                V::kName};
  return k;
}

}  // namespace wick::kernels::dot_impl

// The panel kernels (their own order, the same traits) join the table below.
#include "kernels/panel_impl.h"  // NOLINT(build/include_order): needs the tags above

namespace wick::kernels::dot_impl {

// The kernel table of V's instruction set.
template <class V>
const DotKernels& kernels() {
  static const DotKernels k{dot<V, F32>,
                            dot<V, F16>,
                            dot<V, BF16>,
                            gemv_rows<V, F32>,
                            gemv_rows<V, F16>,
                            gemv_rows<V, BF16>,
                            gemm_tile<V>,
                            gemm_tile<V, F16>,
                            gemm_tile<V, BF16>,
                            widen<V, F16>,
                            widen<V, BF16>,
                            V::kTileRows,
                            V::kTileInputs,
                            lane_reducer<V>(),
                            lane_transposer<V>(),
                            static_cast<int>(V::kLanes),
                            panel_impl::gemv<V, F32>,
                            panel_impl::gemv<V, F16>,
                            panel_impl::gemv<V, BF16>,
                            panel_impl::tile<V, F32>,
                            panel_impl::tile<V, F16>,
                            panel_impl::tile<V, BF16>,
                            panel_impl::widen_pairs<V>,
                            V::kPanelTileVecs * static_cast<int>(V::kLanes),
                            V::kPanelTileInputs,
                            V::kName};
  return k;
}

}  // namespace wick::kernels::dot_impl
