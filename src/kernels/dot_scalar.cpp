// Portable dense kernels (no SIMD instructions assumed), and the dispatch of kernels/dot.h. The
// vector trait of the skeleton in kernels/dot_impl.h over eight plain floats: eight partial sums
// (element i of a row goes to sum i % 8), each a rounded multiply then a rounded add, combined
// pairwise at the end, which keeps the rounding error of long rows low and lets the compiler
// vectorise the loop. GEMV: 2 rows interleaved (16 partial sums fill the 16 SSE registers); GEMM
// tile: 1 x 1.
#include <cmath>

#include "kernels/dot.h"
#include "kernels/dot_impl.h"
#include "kernels/kernel_table.h"

namespace wick::kernels {
namespace {

using dot_impl::BF16;
using dot_impl::F16;
using dot_impl::F32;

struct Scalar {
  static constexpr const char* kName = "scalar";
  static constexpr size_t kLanes = 8;
  struct Vec {
    float v[kLanes];
  };
  using Tail = size_t;  // elements left
  static constexpr int kGemvRows = 2;
  static constexpr int kTileRows = 1;
  static constexpr int kTileInputs = 1;
  // reduce() is not a halving tree and fma() not fused: no lane-major GEMM (dot_impl.h).
  static constexpr bool kLaneMajorGemm = false;

  static Vec zero() { return Vec{}; }
  static Tail tail(size_t left) { return left; }
  static float scalar(F32, float v) { return v; }
  static float scalar(F16, uint16_t v) { return f16_to_f32(v); }
  static float scalar(BF16, uint16_t v) { return bf16_to_f32(v); }
  template <class E>
  static Vec load(E e, const typename E::W* p) {
    Vec r;
    for (size_t j = 0; j < kLanes; ++j) r.v[j] = scalar(e, p[j]);
    return r;
  }
  template <class E>
  static Vec load_tail(E e, const typename E::W* p, Tail left) {
    Vec r{};
    for (size_t j = 0; j < left; ++j) r.v[j] = scalar(e, p[j]);
    return r;
  }
  static Vec fma(const Vec& w, const Vec& x, Vec acc) {
    for (size_t j = 0; j < kLanes; ++j) acc.v[j] += w.v[j] * x.v[j];
    return acc;
  }
  // The panel kernels (kernels/panel_impl.h): std::fma, one rounding per step as on the SIMD
  // ISAs (a library call on CPUs without FMA: slow, but the same bits).
  static Vec fused_fma(const Vec& w, const Vec& x, Vec acc) {
    for (size_t j = 0; j < kLanes; ++j) acc.v[j] = std::fma(w.v[j], x.v[j], acc.v[j]);
    return acc;
  }
  static Vec broadcast(float f) {
    Vec r;
    for (size_t j = 0; j < kLanes; ++j) r.v[j] = f;
    return r;
  }
  static constexpr int kPanelGemvPanels = 1;
  static constexpr int kPanelTileVecs = 2;
  static constexpr int kPanelTileInputs = 2;
  static constexpr int kVecRegisters = 16;
  static void load_pair(BF16, const uint16_t* p, Vec& even, Vec& odd) {
    for (size_t j = 0; j < kLanes; ++j) {
      even.v[j] = bf16_to_f32(p[2 * j]);
      odd.v[j] = bf16_to_f32(p[2 * j + 1]);
    }
  }
  static float reduce(const Vec& a) {
    const float* s = a.v;
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  }
  static void reduce4(const Vec& a, const Vec& b, const Vec& c, const Vec& d, float* y) {
    y[0] = reduce(a);
    y[1] = reduce(b);
    y[2] = reduce(c);
    y[3] = reduce(d);
  }
  static void store(float* p, const Vec& v) {
    for (size_t j = 0; j < kLanes; ++j) p[j] = v.v[j];
  }
  static void store_tail(float* p, const Vec& v, Tail left) {
    for (size_t j = 0; j < left; ++j) p[j] = v.v[j];
  }
};

}  // namespace

const DotKernels& dot_kernels_scalar() {
  return dot_impl::kernels<Scalar>();
}

const DotKernels& dot_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return dot_kernels_avx512();
    case Isa::kAvx2:
      return dot_kernels_avx2();
    case Isa::kScalar:
      break;
  }
  return dot_kernels_scalar();
}

const DotKernels& dot_kernels() {
  return kernel_table().dot;
}

const Bf16DotKernels* bf16_dot_kernels_for(Isa isa) {
  if (isa != Isa::kAvx512 || !cpu_has_avx512_bf16()) return nullptr;
  return &bf16_dot_kernels_avx512();
}

const Bf16DotKernels* bf16_dot_kernels() {
  return kernel_table().bf16_dot;
}

}  // namespace wick::kernels
