// The AVX-512F vector trait of the dense kernels' skeleton (kernels/dot_impl.h), shared by the
// files compiled for AVX-512: dot_avx512.cpp (fp32 / fp16 / bf16 weights times fp32 inputs) and
// dot_bf16_avx512.cpp (which derives the BF16 dot-product trait from it, so both sum lanes with
// the same tree), qmatmul_avx512.cpp and qmatmul_int8_avx512.cpp (whose int8 tile takes its float
// side from it), and wkv7_avx512.cpp (the WKV head, kernels/wkv7_impl.h). Include only from
// *_avx512.cpp files. Summation order: one 16-lane accumulator per (row, input) pair, fused
// multiply-adds over chunks of 16 in order (the partial last chunk masked to zero), then reduce()'s
// fixed tree. GEMV: 4 rows interleaved; GEMM tile: 4 rows x 6 inputs (24 of the 32 zmm registers
// accumulate).
#pragma once

#include <immintrin.h>

#include "kernels/dot.h"
#include "kernels/dot_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own conversion and reduction
// intrinsics as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels {
namespace {

using dot_impl::BF16;
using dot_impl::F16;
using dot_impl::F32;

struct Avx512 {
  static constexpr const char* kName = "avx512";
  using Vec = __m512;
  using Tail = __mmask16;  // the lanes of the partial last chunk
  static constexpr size_t kLanes = 16;
  // 4 rows, not 8: four FMA chains already hide the latency of a step that streams from memory,
  // and half as many row streams (plus the next group's, prefetched) keep more of the bandwidth.
  // Intel Xeon Emerald Rapids, 2 threads, `wick bench --prompt 0 --gen 128 --reps 3` of the 0.1B
  // synth models, 4 alternating rounds, medians: bf16 14.65 -> 13.67 ms/token, fp16 14.32 ->
  // 13.05, fp32 23.6 -> 21.4 (10 of 12 pairs faster); 1.5B (--gen 32 --reps 2, 3 rounds): bf16
  // 132.6 -> 128.1, fp16 127.3 -> 115.1 (6 of 6). Rows' sums are their own: no bits change.
  static constexpr int kGemvRows = 4;
  static constexpr int kTileRows = 4;
  static constexpr int kTileInputs = 6;
  // fma() is fused and reduce() a halving tree (lane j adds lane j + kLanes / 2, and so on down
  // to lane 0 + lane 1): a GEMM may run the row-major order as lane-major panels (dot_impl.h).
  static constexpr bool kLaneMajorGemm = true;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Tail tail(size_t left) { return static_cast<__mmask16>((1u << left) - 1u); }
  static Vec load(F32, const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(F16, const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Vec load(BF16, const uint16_t* p) {
    return bf16_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Vec load_tail(F32, const float* p, Tail m) { return _mm512_maskz_loadu_ps(m, p); }
  static Vec load_tail(F16, const uint16_t* p, Tail m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
  static Vec load_tail(BF16, const uint16_t* p, Tail m) {
    return bf16_bits(_mm256_maskz_loadu_epi16(m, p));
  }
  static Vec fma(Vec w, Vec x, Vec acc) { return _mm512_fmadd_ps(w, x, acc); }
  // The panel kernels (kernels/panel_impl.h): fused, 4 panels side by side in the GEMV (4 chains
  // of 16 rows), a GEMM tile of 3 vectors (48 rows, three panels) x 8 inputs: 24 of the 32 zmm
  // registers accumulate, each step loads 3 vectors of weights and broadcasts 8 inputs. The
  // 2 x 12 tile (the same 24 accumulators) ran out of general registers for its 12 input
  // pointers (a stack reload in its loop) and measured slower on an Intel Ice Lake: one thread,
  // BM_PanelGemm/bf16/3072/768/512 105-110 against 122-132 GFLOP/s (3 alternating rounds).
  static Vec fused_fma(Vec w, Vec x, Vec acc) { return _mm512_fmadd_ps(w, x, acc); }
  static constexpr int kPanelGemvPanels = 4;
  static constexpr int kPanelTileVecs = 3;
  static constexpr int kPanelTileInputs = 8;
  static constexpr int kVecRegisters = 32;
  // 16 lanes of two bf16 each (panels of pairs, kernels/panels.h): the low halves as one vector of
  // fp32, the high halves as the next (both exact: a bf16 is the top 16 bits of its fp32).
  static void load_pair(BF16, const uint16_t* p, Vec& even, Vec& odd) {
    const __m512i v = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_maskz_mov_epi16(kHighHalves, v));
  }
  // For the WKV head (kernels/wkv7_impl.h): rows interleaved, and the lane-wise a * b, a - b and
  // f in every lane. Four rows: with their reductions sharing reduce4's shuffles, on an Intel Ice
  // Lake BM_Wkv7Segments/12/64/1 took 575-602 us against 792-910 for one row and 695-720 for two
  // (8 rows: 640-679), three alternating rounds. On a Zen 5, before the rows shared their
  // reductions, one row had measured best (~420 us against ~600 for two and ~540 for four); the
  // shared reductions were not measured there.
  static constexpr int kWkvRows = 4;
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec broadcast(float f) { return _mm512_set1_ps(f); }
  // The fixed tree, written out (not _mm512_reduce_add_ps, whose tree is the compiler's): lane i
  // + lane i + 8, then i + i + 4, then i + i + 2, then lane 0 + lane 1 (GCC 12's tree).
  static float reduce(Vec v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), high_half(v));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Four of those trees at once, each level's additions of the four vectors in one instruction.
  static void reduce4(Vec a, Vec b, Vec c, Vec d, float* y) {
    const __m512i first = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm_storeu_ps(y, _mm512_castps512_ps128(_mm512_permutexvar_ps(first, trees4(a, b, c, d))));
  }
  // reduce4's four sums, sum q in every lane of out[q], for the WKV head, whose next step
  // multiplies by them: the same trees, each sum taken from the lane reduce4 stores (lane 0 of
  // block q), without the trip through memory (a store and four reloads on the head's critical
  // path).
  static void reduce4_broadcast(Vec a, Vec b, Vec c, Vec d, Vec* out) {
    const __m512 s = trees4(a, b, c, d);
    for (int q = 0; q < 4; ++q) out[q] = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * q), s);
  }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void store_tail(float* p, Vec v, Tail m) { _mm512_mask_storeu_ps(p, m, v); }
  // DotKernels::transpose_lanes: 16 rows' elements k .. k + 15 as 16 columns of 16 rows, column
  // j at dst + j * col_stride; the 16 x 16 transposition in four rounds of 16 shuffles.
  static void transpose_lanes(const float* const* rows, size_t k, float* dst, size_t col_stride) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; ++i) {  // pairs of rows, 32-bit interleave within 128-bit blocks
      const __m512 x = _mm512_loadu_ps(rows[2 * i] + k), y = _mm512_loadu_ps(rows[2 * i + 1] + k);
      a[2 * i] = _mm512_unpacklo_ps(x, y);
      a[2 * i + 1] = _mm512_unpackhi_ps(x, y);
    }
    // 64-bit interleave: block L of b[4 i + q] holds column 4 L + q of rows 4 i .. 4 i + 3.
    for (int i = 0; i < 4; ++i)
      for (int h = 0; h < 2; ++h) {
        const __m512d x = _mm512_castps_pd(a[4 * i + h]), y = _mm512_castps_pd(a[4 * i + 2 + h]);
        b[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
        b[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
      }
    // Column 4 L + q = blocks L of b[q], b[4 + q], b[8 + q], b[12 + q].
    for (int q = 0; q < 4; ++q) {
      const __m512 c0 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x88);
      const __m512 c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xDD);
      const __m512 c2 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x88);
      const __m512 c3 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xDD);
      _mm512_storeu_ps(dst + q * col_stride, _mm512_shuffle_f32x4(c0, c2, 0x88));
      _mm512_storeu_ps(dst + (4 + q) * col_stride, _mm512_shuffle_f32x4(c1, c3, 0x88));
      _mm512_storeu_ps(dst + (8 + q) * col_stride, _mm512_shuffle_f32x4(c0, c2, 0xDD));
      _mm512_storeu_ps(dst + (12 + q) * col_stride, _mm512_shuffle_f32x4(c1, c3, 0xDD));
    }
  }

 private:
  // reduce()'s tree of a, b, c and d side by side: lane 0 of 128-bit block q holds vector q's sum.
  static __m512 trees4(Vec a, Vec b, Vec c, Vec d) {
    // i + (i + 8): [a 0-3, a 4-7, b 0-3, b 4-7] (lanes as sums of 2).
    const __m512 ab =
        _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    const __m512 cd =
        _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    // i + (i + 4): one 128-bit block per vector, [a, b, c, d].
    __m512 s =
        _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4E));     // lane 0 + lane 2, lane 1 + lane 3
    return _mm512_add_ps(s, _mm512_permute_ps(s, 0xB1));  // lane 0 + lane 1
  }
  // The high 16-bit half of every 32-bit lane, as a mask register (no vector register held).
  static constexpr __mmask32 kHighHalves = 0xAAAAAAAAu;
  static __m256 high_half(Vec v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  }
  static Vec bf16_bits(__m256i h) {  // 16 bf16 -> fp32: the bits, 16 places up
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace
}  // namespace wick::kernels
