#include "kernels/activations.h"

#include <cstring>

namespace wick::kernels {

void relu_squared(float* h, int64_t n) {
  // h > 0 read off the bits (a positive sign and at most +inf's pattern: NaN, -0 and negatives
  // fail), so the select is a mask the compiler vectorises instead of a mispredicted branch.
  constexpr int32_t kInfBits = 0x7f800000;
  for (int64_t i = 0; i < n; ++i) {
    int32_t bits;
    std::memcpy(&bits, h + i, sizeof bits);
    bits &= -static_cast<int32_t>(bits > 0 && bits <= kInfBits);
    float relu;
    std::memcpy(&relu, &bits, sizeof relu);
    h[i] = relu * relu;
  }
}

}  // namespace wick::kernels
