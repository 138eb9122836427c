#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "wick/errors.h"

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

Isa isa_from_env(const char* env, Isa best) {
  if (env == nullptr || *env == '\0') return best;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_name(isa) != env) continue;
    if (static_cast<int>(isa) > static_cast<int>(best))
      throw InputError(
          "WICK_ISA=" + std::string(env) + " names an instruction set this CPU lacks (" +
          "it supports up to " + std::string(isa_name(best)) +
          "); unset WICK_ISA or give scalar, avx2 or avx512 up to " + std::string(isa_name(best)));
    return isa;
  }
  throw InputError("WICK_ISA=" + std::string(env) +
                   " is not an instruction set wick knows; give scalar, avx2 or avx512 (or unset "
                   "it to use the best this CPU has, " +
                   std::string(isa_name(best)) + ")");
}

Isa active_isa() {
  // Decided once; a WICK_ISA that cannot be honoured throws here at every call (the static is
  // only set by a successful initialisation), so no kernel ever runs with an ISA other than the
  // one asked for.
  static const Isa isa = isa_from_env(std::getenv("WICK_ISA"), best_supported_isa());
  return isa;
}

// (__builtin_cpu_supports takes only a literal, hence a macro.)
#if defined(__x86_64__) || defined(__i386__)
#define WICK_AVX512_WITH(feature) \
  (best_supported_isa() == Isa::kAvx512 && __builtin_cpu_supports(feature) != 0)
#else
#define WICK_AVX512_WITH(feature) false
#endif

bool cpu_has_avx512_vnni() {
  static const bool has = WICK_AVX512_WITH("avx512vnni");
  return has;
}

bool cpu_has_avx512_bf16() {
  static const bool has = WICK_AVX512_WITH("avx512bf16");
  return has;
}

#undef WICK_AVX512_WITH

int64_t cpu_l2_bytes() {
  static const int64_t bytes = [] {
    const long b = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    return b > 0 ? static_cast<int64_t>(b) : int64_t{256} * 1024;
  }();
  return bytes;
}

IntIsa int8_isa(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return cpu_has_avx512_vnni() ? IntIsa::kAvx512Vnni : IntIsa::kAvx2;
    case Isa::kAvx2:
      return IntIsa::kAvx2;
    case Isa::kScalar:
      break;
  }
  return IntIsa::kScalar;
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
