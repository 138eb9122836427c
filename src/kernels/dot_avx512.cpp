// AVX-512F dense kernels (compiled with -mavx512f ...; only called when the CPU has AVX-512): the
// vector trait of the skeleton in kernels/dot_impl.h. Summation order: one 16-lane accumulator per
// (row, input) pair, fused multiply-adds over chunks of 16 in order (the partial last chunk
// masked to zero), then _mm512_reduce_add_ps (a fixed tree). GEMV: 8 rows interleaved; GEMM
// tile: 4 rows x 6 inputs (24 of the 32 zmm registers accumulate).
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
  static constexpr int kGemvRows = 8;
  static constexpr int kTileRows = 4;
  static constexpr int kTileInputs = 6;

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
  static float reduce(Vec v) { return _mm512_reduce_add_ps(v); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static void store_tail(float* p, Vec v, Tail m) { _mm512_mask_storeu_ps(p, m, v); }

 private:
  static Vec bf16_bits(__m256i h) {  // 16 bf16 -> fp32: the bits, 16 places up
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace

const DotKernels& dot_kernels_avx512() {
  return dot_impl::kernels<Avx512>();
}

}  // namespace wick::kernels
