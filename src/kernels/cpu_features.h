// Runtime CPU dispatch: the instruction set the kernels use is chosen once, at first use, from
// what the CPU supports (cpuid via __builtin_cpu_supports). The environment variable
// WICK_ISA=scalar|avx2|avx512 forces a lower level (for tests and benchmarks); asking for a level
// the CPU lacks falls back to the best available one.
#pragma once

#include <string_view>

namespace wick::kernels {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The level in use (detected once; thread-safe).
Isa active_isa();
// Best level this CPU supports, ignoring WICK_ISA.
Isa best_supported_isa();
std::string_view isa_name(Isa isa);

}  // namespace wick::kernels
