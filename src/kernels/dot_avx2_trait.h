// The AVX2 + FMA + F16C vector trait of the dense kernels' skeleton (kernels/dot_impl.h), shared
// by the files compiled for AVX2: dot_avx2.cpp, qmatmul_avx2.cpp (whose fused GEMV of packed
// codes follows the same summation order), qmatmul_int8_avx2.cpp (whose int8 tile takes its
// float side from it) and wkv7_avx2.cpp (the WKV head, kernels/wkv7_impl.h). Include only from
// *_avx2.cpp files. Summation order: one 8-lane accumulator per (row, input) pair, fused
// multiply-adds over chunks of 8 in order (the partial last chunk zero-padded), then hsum's fixed
// tree (kernels/hsum_avx2.h). GEMV: 8 rows interleaved; GEMM tile: 3 rows x 4 inputs (16 ymm
// registers: 12 accumulators + 3 weights + 1 input).
#pragma once

#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/dot_impl.h"
#include "kernels/hsum_avx2.h"

namespace wick::kernels {
namespace {

using dot_impl::BF16;
using dot_impl::F16;
using dot_impl::F32;

struct Avx2 {
  static constexpr const char* kName = "avx2";
  using Vec = __m256;
  using Tail = size_t;  // elements left
  static constexpr size_t kLanes = 8;
  static constexpr int kGemvRows = 8;
  static constexpr int kTileRows = 3;
  static constexpr int kTileInputs = 4;
  // fma() is fused and reduce() a halving tree (lane j adds lane j + kLanes / 2, and so on down
  // to lane 0 + lane 1): a GEMM may run the row-major order as lane-major panels (dot_impl.h).
  static constexpr bool kLaneMajorGemm = true;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Tail tail(size_t left) { return left; }
  static Vec load(F32, const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(F16, const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Vec load(BF16, const uint16_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  // The partial last chunk through a zero-padded buffer (no masked loads of 16-bit elements).
  static float scalar(F32, float v) { return v; }
  static float scalar(F16, uint16_t v) { return f16_to_f32(v); }
  static float scalar(BF16, uint16_t v) { return bf16_to_f32(v); }
  template <class E>
  static Vec load_tail(E e, const typename E::W* p, Tail left) {
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < left; ++i) buf[i] = scalar(e, p[i]);
    return _mm256_load_ps(buf);
  }
  static Vec fma(Vec w, Vec x, Vec acc) { return _mm256_fmadd_ps(w, x, acc); }
  // The panel kernels (kernels/panel_impl.h): fused, 4 panels side by side in the GEMV (8 chains
  // of 8 rows), a GEMM tile of 2 vectors (16 rows, one panel) x 6 inputs: 12 of the 16 ymm
  // registers accumulate, 2 hold the step's weights, 1 the broadcast input.
  static Vec fused_fma(Vec w, Vec x, Vec acc) { return _mm256_fmadd_ps(w, x, acc); }
  static constexpr int kPanelGemvPanels = 4;
  static constexpr int kPanelTileVecs = 2;
  static constexpr int kPanelTileInputs = 6;
  static constexpr int kVecRegisters = 16;
  // 8 lanes of two bf16 each (panels of pairs, kernels/panels.h): the low halves as one vector of
  // fp32, the high halves as the next (both exact: a bf16 is the top 16 bits of its fp32).
  static void load_pair(BF16, const uint16_t* p, Vec& even, Vec& odd) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    odd =
        _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  // For the WKV head (kernels/wkv7_impl.h): rows interleaved, and the lane-wise a * b, a - b and
  // f in every lane. Four rows (this trait's reduce4 is four reduce calls, so the gain is the
  // interleaving): on an Intel Ice Lake with WICK_ISA=avx2, BM_Wkv7Segments/12/1/1 10.1-14.6 us
  // against 13.6-16.7 for two rows and 12/64/1 400-571 against 459-635 (three alternating
  // rounds). Two rows had measured best on a Zen 5 (12/1/1 8.6-9.3 us against 11-13 for one);
  // four were not measured there, nor on a Zen 3, since.
  static constexpr int kWkvRows = 4;
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec broadcast(float f) { return _mm256_set1_ps(f); }
  static float reduce(Vec v) { return hsum(v); }
  static void reduce4(Vec a, Vec b, Vec c, Vec d, float* y) {
    y[0] = reduce(a);
    y[1] = reduce(b);
    y[2] = reduce(c);
    y[3] = reduce(d);
  }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static void store_tail(float* p, Vec v, Tail left) {
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    for (size_t i = 0; i < left; ++i) p[i] = buf[i];
  }
};

}  // namespace
}  // namespace wick::kernels
