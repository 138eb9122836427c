// The AVX2 WKV-7 head update (head sizes a multiple of 8, at most 256; 64 in released models): the
// skeleton of kernels/wkv7_impl.h over the AVX2 vector trait, V::kWkvRows rows interleaved.
#include "kernels/dot_avx2_trait.h"
#include "kernels/wkv7_impl.h"

namespace wick::kernels {

void wkv7_head_avx2(int N, float* S, const float* r, const float* w, const float* k, const float* v,
                    const float* kk, const float* a, float* y) {
  wkv7_impl::head<Avx2>(N, S, r, w, k, v, kk, a, y);
}

}  // namespace wick::kernels
