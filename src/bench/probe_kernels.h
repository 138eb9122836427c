// The probes' inner loops, written once for a vector of kBytes bytes (GCC vector extensions) and
// compiled per instruction set: probe_avx512.cpp (64), probe_avx2.cpp (32), probe_sse2.cpp (16),
// each with its own -m flags (src/bench/CMakeLists.txt) and one line,
// WICK_BENCH_PROBE_TABLE(kProbeAvx2, "avx2", 32), defining its table (probe_isa.h). Internal to
// src/bench: the anonymous namespace gives every file its own copy of the loops, so the three
// instantiations, compiled with different flags, never meet at link time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "probe_isa.h"

namespace wick::bench::detail {
namespace {

// V: float __attribute__((vector_size(B))), B = 16, 32 or 64 (a GCC vector extension type; it
// is a parameter, not derived from B inside the template, because GCC drops vector_size on a
// dependent typedef).
template <typename V>
struct ProbeLoops {
  static constexpr size_t kBytes = sizeof(V);
  static constexpr size_t kLanes = kBytes / sizeof(float);
  static constexpr size_t kBlock = 8 * kLanes;  // floats one step of read_sum loads
  static constexpr int kChains = 12;

  // Sum of p[0, n): 8 independent accumulators, aligned full-width loads. p is aligned to kBytes
  // and n is a multiple of kBlock.
  static double read_sum(const float* p, size_t n) {
    const V* v = reinterpret_cast<const V*>(__builtin_assume_aligned(p, kBytes));
    V a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {};
    for (size_t i = 0, e = n / kLanes; i < e; i += 8) {
      a0 += v[i];
      a1 += v[i + 1];
      a2 += v[i + 2];
      a3 += v[i + 3];
      a4 += v[i + 4];
      a5 += v[i + 5];
      a6 += v[i + 6];
      a7 += v[i + 7];
    }
    const V s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    double r = 0;
    for (size_t l = 0; l < kLanes; ++l) r += s[l];
    return r;
  }

  // kChains independent chains acc = acc * mul + add, `iterations` steps each, in registers (the
  // file is compiled with -ffp-contract=fast, so each step is one FMA where the ISA has it).
  static float fma_chains(int64_t iterations, float mul) {
    V acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = V{} + 0.001f * static_cast<float>(c);
    const V m = V{} + mul, a = V{} + 1e-4f;
    for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + a;
    }
    V s = acc[0];
    for (int c = 1; c < kChains; ++c) s += acc[c];
    return s[0];
  }
};

}  // namespace
}  // namespace wick::bench::detail

#define WICK_BENCH_PROBE_TABLE(NAME, ISA, BYTES)                                                 \
  namespace wick::bench::detail {                                                                \
  namespace {                                                                                    \
  typedef float NAME##Vector __attribute__((vector_size(BYTES)));                                \
  using NAME##Loops = ProbeLoops<NAME##Vector>;                                                  \
  }                                                                                              \
  extern const ProbeTable NAME = {ISA,                                                           \
                                  NAME##Loops::kBlock,                                           \
                                  BYTES,                                                         \
                                  &NAME##Loops::read_sum,                                        \
                                  &NAME##Loops::fma_chains,                                      \
                                  static_cast<int>(NAME##Loops::kLanes * NAME##Loops::kChains)}; \
  }
