// AVX2 + FMA + F16C dense kernels (only called when the CPU has them): the skeleton of
// kernels/dot_impl.h instantiated with the trait of kernels/dot_avx2_trait.h.
#include "kernels/dot_avx2_trait.h"

namespace wick::kernels {

const DotKernels& dot_kernels_avx2() {
  return dot_impl::kernels<Avx2>();
}

}  // namespace wick::kernels
