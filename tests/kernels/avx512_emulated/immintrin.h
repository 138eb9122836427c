// Stand-in for <immintrin.h> when an AVX-512 kernel source is compiled for a CPU without AVX-512
// (run.sh): the intrinsics come from SIMDe (Debian package libsimde-dev), which implements them
// in portable C with the instructions' documented semantics. Never used by the real build.
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>

// Not in SIMDe 0.7.4: the sum of the 16 int32 lanes, wrapping modulo 2^32 as the instruction
// sequence the compiler emits for it does.
static inline int _mm512_reduce_add_epi32(simde__m512i v) {
  int32_t lanes[16];
  simde_mm512_storeu_si512(lanes, v);
  uint32_t s = 0;
  for (int32_t l : lanes) s += static_cast<uint32_t>(l);
  return static_cast<int>(s);
}
