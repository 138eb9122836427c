// The element-wise activations against the expressions of docs/x070-math.md, bit for bit,
// special values included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/activations.h"

namespace wick::kernels {
namespace {

TEST(Activations, ReluSquaredMatchesTheSelectExpressionBitForBit) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> h = {0.f,  -0.f, 1.f,    -1.f, 2.5f, -3.f,  inf, -inf,
                          1e-40f, -1e-40f, 1e19f, 1e20f, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max()};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int i = 0; i < 1000; ++i) h.push_back(nd(rng));  // long enough for the vector loop
  std::vector<float> want(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const float relu = h[i] > 0.f ? h[i] : 0.f;
    want[i] = relu * relu;
  }
  std::vector<float> got = h;
  relu_squared(got.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(bits_of(got[i]), bits_of(want[i])) << "h = " << h[i] << " at " << i;
  // A different input gives a different output.
  std::vector<float> other = h;
  other[2] = 3.f;
  relu_squared(other.data(), static_cast<int64_t>(other.size()));
  EXPECT_NE(bits_of(other[2]), bits_of(got[2]));
}

}  // namespace
}  // namespace wick::kernels
