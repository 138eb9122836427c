#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

namespace wick::kernels {
namespace {

bool has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

}  // namespace

Isa best_supported_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return Isa::kAvx512;
  }
  // The AVX2 kernels also widen fp16 with F16C (vcvtph2ps); every AVX2 CPU has it, but check.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    return Isa::kAvx2;
#endif
  return Isa::kScalar;
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = best_supported_isa();
    const char* env = std::getenv("WICK_ISA");
    if (env == nullptr) return best;
    Isa wanted = best;
    if (std::strcmp(env, "scalar") == 0) wanted = Isa::kScalar;
    if (std::strcmp(env, "avx2") == 0) wanted = Isa::kAvx2;
    if (std::strcmp(env, "avx512") == 0) wanted = Isa::kAvx512;
    return static_cast<int>(wanted) <= static_cast<int>(best) ? wanted : best;
  }();
  return isa;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace wick::kernels
