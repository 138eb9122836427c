// Runtime CPU dispatch: the instruction set the kernels use is chosen once, at first use, from
// what the CPU supports (cpuid via __builtin_cpu_supports). The environment variable
// WICK_ISA=scalar|avx2|avx512 forces a lower level (for tests and benchmarks); a level the CPU
// lacks, or an unknown name, is an error (InputError from active_isa(), raised early by the
// Runtime constructor) rather than a silent fallback that would mislabel a benchmark.
#pragma once

#include <cstdint>
#include <string_view>

namespace wick::kernels {

enum class Isa { kScalar, kAvx2, kAvx512 };

// The level in use (detected once; thread-safe). Throws InputError when WICK_ISA names a level
// this CPU lacks or an unknown one.
Isa active_isa();
// The level WICK_ISA (`env`, may be null or empty: `best`) selects on a CPU whose best level is
// `best`. Throws InputError as active_isa() does.
Isa isa_from_env(const char* env, Isa best);
// Best level this CPU supports, ignoring WICK_ISA.
Isa best_supported_isa();
std::string_view isa_name(Isa isa);
// Extensions of the AVX-512 level, each false unless best_supported_isa() is kAvx512 too:
// VNNI (vpdpbusd, the INT8 kernel) and BF16 (vdpbf16ps, the --precision bf16 product of bf16
// weights). Detected once; thread-safe. WICK_ISA below avx512 makes the kernel tables ignore them.
bool cpu_has_avx512_vnni();
bool cpu_has_avx512_bf16();
// Bytes of the L2 cache of one core (sysconf; 256 KiB where the system does not say). Detected
// once; thread-safe.
int64_t cpu_l2_bytes();

// The level of the integer (INT8 x INT8) kernels under `isa`: their AVX-512 form needs VNNI, so on
// an AVX-512 CPU without it they run in their AVX2 form (which every AVX-512 CPU runs).
enum class IntIsa { kScalar, kAvx2, kAvx512Vnni };
IntIsa int8_isa(Isa isa);

}  // namespace wick::kernels
