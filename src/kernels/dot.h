// Dot products of one stored weight row (fp32, fp16 or bf16) with an fp32 vector, accumulated in
// fp32. One implementation per instruction set (dot_scalar.cpp, dot_avx2.cpp, dot_avx512.cpp);
// `dot_kernels()` returns the set chosen by cpu_features.h. The GEMV and the GEMM both call these,
// so a row computed by either pass is bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace wick::kernels {

// fp16 / bf16 bit patterns <-> float (exact widening; fp16 subnormals preserved).
float f16_to_f32(uint16_t h);
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

using DotF32 = float (*)(const float* w, const float* x, size_t n);
using DotU16 = float (*)(const uint16_t* w, const float* x, size_t n);

struct DotKernels {
  DotF32 f32;
  DotU16 f16;
  DotU16 bf16;
};

const DotKernels& dot_kernels();
const DotKernels& dot_kernels_for(Isa isa);

// Per-ISA tables (defined in the dot_*.cpp files).
const DotKernels& dot_kernels_scalar();
const DotKernels& dot_kernels_avx2();
const DotKernels& dot_kernels_avx512();

}  // namespace wick::kernels
