// The AVX-512 WKV-7 head update (head sizes a multiple of 16; 64 in released models): the skeleton
// of kernels/wkv7_impl.h over the AVX-512 vector trait, V::kWkvRows rows at a time.
#include "kernels/dot_avx512_trait.h"
#include "kernels/wkv7_impl.h"

namespace wick::kernels {

void wkv7_head_avx512(int N, float* S, const float* r, const float* w, const float* k,
                      const float* v, const float* kk, const float* a, float* y) {
  wkv7_impl::head<Avx512>(N, S, r, w, k, v, kk, a, y);
}

}  // namespace wick::kernels
