// The sampler loops compiled for AVX2 (only called when the CPU has it).
#include "kernels/sampler_loops_impl.h"

namespace wick::kernels {

const SamplerLoops& sampler_loops_avx2() {
  return make_table("avx2");
}

}  // namespace wick::kernels
