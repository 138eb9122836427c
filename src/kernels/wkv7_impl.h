// The WKV-7 head update of kernels/wkv7.h (one head, one token) written once for the SIMD
// instruction sets: wkv7_avx2.cpp and wkv7_avx512.cpp instantiate wkv7_impl::head<V> with their
// vector trait of kernels/dot_impl.h (dot_avx2_trait.h / dot_avx512_trait.h), which for this
// kernel also provides mul(a, b), sub(a, b), broadcast(f) and kWkvRows. Include only from the
// files compiled for one ISA.
//
// Summation order, per row i of the state (fixed, whatever the rows around it): sa[i] in one
// accumulator of V::kLanes lanes, S[i, j..j+L) * (0 - kk[j..j+L)) fused-added chunk by chunk in
// order, then V::reduce's tree; the new row S'[i, j] = fma(v[i], k[j], fma(sa[i], kk[j] * a[j],
// S[i, j] * w[j])); y[i] the same way over S'[i, j] * r[j]. V::kWkvRows rows are interleaved
// (sharing the loads of kk, a, w, k, r and overlapping their dependency chains), each trait's
// measured best; each row's operations are its own, so the count does not enter its bits (the
// frozen hashes, tests/kernels/test_wkv7_frozen.cpp, check the chosen counts).
#pragma once

#include <cstdint>

#include "kernels/dot_impl.h"

namespace wick::kernels::wkv7_impl {

// RWKV-7's head size: the head update's loops unroll for it (head below).
constexpr int kHeadSize = 64;

// Traits that can hand reduce4's sums back already broadcast, in registers (AVX-512).
template <class V>
concept Reduce4Broadcast = requires(typename V::Vec v, typename V::Vec* out) {
  V::reduce4_broadcast(v, v, v, v, out);
};

// -kk and kk * a at elements j .. j + V::kLanes - 1 (per row group, or once per head at kHeadSize).
template <class V>
inline typename V::Vec neg_kk(const float* kk, int j) {
  return V::sub(V::zero(), V::load(dot_impl::F32{}, kk + j));
}
template <class V>
inline typename V::Vec kk_a(const float* kk, const float* a, int j) {
  return V::mul(V::load(dot_impl::F32{}, kk + j), V::load(dot_impl::F32{}, a + j));
}

// Rows i .. i + R - 1 of one head's state S [N, N] (N % V::kLanes == 0). NC, when not 0, is N
// known at compile time (the loops over a row then unroll) and pre the head's -kk and kk * a
// computed once for all its rows (pre[0, NC) and pre[NC, 2 NC); the same operations as below).
template <class V, int R, int NC = 0>
inline void rows(int n, float* __restrict S, int i, const float* __restrict r,
                 const float* __restrict w, const float* __restrict k, const float* __restrict v,
                 const float* __restrict kk, const float* __restrict a, const float* __restrict pre,
                 float* __restrict y) {
  const int N = NC != 0 ? NC : n;
  using Vec = typename V::Vec;
  constexpr int L = static_cast<int>(V::kLanes);
  constexpr dot_impl::F32 f{};
  float* Si[R];
  Vec sa[R], vi[R], yacc[R];
  for (int q = 0; q < R; ++q) {
    Si[q] = S + static_cast<int64_t>(i + q) * N;
    sa[q] = V::zero();
  }
  for (int j = 0; j < N; j += L) {
    const Vec nk = NC != 0 ? V::load(f, pre + j) : neg_kk<V>(kk, j);
    for (int q = 0; q < R; ++q) sa[q] = V::fma(V::load(f, Si[q] + j), nk, sa[q]);
  }
  if constexpr (R == 4 && Reduce4Broadcast<V>) {
    Vec b[4];
    V::reduce4_broadcast(sa[0], sa[1], sa[2], sa[3], b);  // reduce4's sums, in every lane
    for (int q = 0; q < R; ++q) sa[q] = b[q];
  } else {
    float sums[R];
    dot_impl::reduce_n<V, R>(sa, sums);  // V::reduce of each, four trees at a time
    for (int q = 0; q < R; ++q) sa[q] = V::broadcast(sums[q]);
  }
  for (int q = 0; q < R; ++q) {
    vi[q] = V::broadcast(v[i + q]);
    yacc[q] = V::zero();
  }
  for (int j = 0; j < N; j += L) {
    const Vec b = NC != 0 ? V::load(f, pre + NC + j) : kk_a<V>(kk, a, j);
    const Vec wv = V::load(f, w + j), kv = V::load(f, k + j), rv = V::load(f, r + j);
    for (int q = 0; q < R; ++q) {
      Vec s = V::mul(V::load(f, Si[q] + j), wv);
      s = V::fma(sa[q], b, s);
      s = V::fma(vi[q], kv, s);
      V::store(Si[q] + j, s);
      yacc[q] = V::fma(s, rv, yacc[q]);
    }
  }
  dot_impl::reduce_n<V, R>(yacc, y + i);
}

// One head, one token (kernels/wkv7.h Wkv7HeadFn): S [N, N] updated in place, y [N] written.
// N % V::kLanes == 0 (then N % V::kWkvRows == 0 too).
template <class V>
void head(int N, float* S, const float* r, const float* w, const float* k, const float* v,
          const float* kk, const float* a, float* y) {
  static_assert(V::kLanes % V::kWkvRows == 0, "row groups must tile every head size");
  if (N == kHeadSize) {
    // -kk, then kk * a, for every group of rows; then copies of r, w and k, and the outputs
    // staged before they go to y in one pass at the end - the same operations (so the same bits),
    // with every load of the row loop from this small local block and no store to y among them.
    // Intel Emerald Rapids, three alternating rounds with and without it (and reduce4_broadcast
    // where the trait has it): BM_Wkv7Segments/12/1/1 6.09-6.38 -> 5.77-6.05 us (3 of 3).
    constexpr int H = kHeadSize;
    alignas(64) float pre[2 * H], local[4 * H];
    for (int j = 0; j < H; j += static_cast<int>(V::kLanes)) {
      V::store(pre + j, neg_kk<V>(kk, j));
      V::store(pre + H + j, kk_a<V>(kk, a, j));
      V::store(local + j, V::load(dot_impl::F32{}, r + j));
      V::store(local + H + j, V::load(dot_impl::F32{}, w + j));
      V::store(local + 2 * H + j, V::load(dot_impl::F32{}, k + j));
    }
    float* ys = local + 3 * H;
    for (int i = 0; i < N; i += V::kWkvRows)
      rows<V, V::kWkvRows, H>(N, S, i, local, local + H, local + 2 * H, v, kk, a, pre, ys);
    for (int j = 0; j < H; j += static_cast<int>(V::kLanes))
      V::store(y + j, V::load(dot_impl::F32{}, ys + j));
    return;
  }
  for (int i = 0; i < N; i += V::kWkvRows)
    rows<V, V::kWkvRows>(N, S, i, r, w, k, v, kk, a, nullptr, y);
}

}  // namespace wick::kernels::wkv7_impl
