// The sampler loops' baseline build (SSE2 on x86-64) and their dispatch.
#include "kernels/sampler_loops.h"

#include "kernels/kernel_table.h"
#include "kernels/sampler_loops_impl.h"

namespace wick::kernels {

const SamplerLoops& sampler_loops_scalar() {
  return make_table("scalar");
}

const SamplerLoops& sampler_loops_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:  // the AVX2 build (measured faster there: see sampler_loops.h)
    case Isa::kAvx2:
      return sampler_loops_avx2();
    case Isa::kScalar:
      break;
  }
  return sampler_loops_scalar();
}

const SamplerLoops& sampler_loops() {
  return kernel_table().sampler;
}

}  // namespace wick::kernels
