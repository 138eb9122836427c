// What the kernel tests share: the instruction sets of this CPU (every kernel is tested for each
// one it has), and a hash of outputs' bit patterns for the frozen-bits tests, which hash a
// kernel's outputs on seeded inputs and compare the hash with one captured from an earlier
// version of the kernel, so a change of bits cannot pass.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu_features.h"

namespace wick::kernels {

// FNV-1a, 64 bits, over the bit patterns of the floats added (so -0 and +0, or two NaNs with
// different payloads, hash differently).
struct BitHash {
  uint64_t h = 1469598103934665603ull;
  void add(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) h = (h ^ ((u >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
};

// The bit pattern of a float.
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Whether this CPU runs `isa`'s kernels.
inline bool this_cpu_has(Isa isa) {
  return static_cast<int>(isa) <= static_cast<int>(best_supported_isa());
}

// The instruction sets this CPU has (every one is tested; none is skipped where present).
inline std::vector<Isa> isas_of_this_cpu() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (this_cpu_has(isa)) out.push_back(isa);
  return out;
}

}  // namespace wick::kernels
