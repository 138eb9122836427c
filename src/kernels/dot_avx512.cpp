// AVX-512F dense kernels (compiled with -mavx512f ...; only called when the CPU has AVX-512): the
// skeleton of kernels/dot_impl.h instantiated with the trait of kernels/dot_avx512_trait.h.
#include "kernels/dot_avx512_trait.h"

namespace wick::kernels {

const DotKernels& dot_kernels_avx512() {
  return dot_impl::kernels<Avx512>();
}

}  // namespace wick::kernels
