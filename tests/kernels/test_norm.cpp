// The normalisations (kernels/norm.h): LayerNorm against the same formula in long double, in place
// the same bits as out of place, GroupNorm equal to LayerNorm of each group bit for bit, and a
// change in one group moving that group's outputs only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/norm.h"

namespace wick::kernels {
namespace {

std::vector<float> random_floats(size_t n, unsigned seed, float offset) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = offset + d(rng);
  return v;
}

// Lengths that leave every remainder of the 8 partial sums, and a large offset (the mean 100
// times the spread, where a one-pass variance would lose digits).
TEST(Norm, LayerNormMatchesTheLongDoubleFormula) {
  for (int64_t n : {1, 2, 7, 8, 9, 64, 767, 768, 1001})
    for (const bool with_beta : {false, true}) {
      const auto x = random_floats(static_cast<size_t>(n), 3, 100.f);
      const auto gamma = random_floats(static_cast<size_t>(n), 4, 1.f);
      const auto beta = random_floats(static_cast<size_t>(n), 5, 0.f);
      std::vector<float> y(static_cast<size_t>(n));
      layer_norm(x.data(), gamma.data(), with_beta ? beta.data() : nullptr, y.data(), n, 1e-5);
      long double sum = 0, sq = 0;
      for (float v : x) sum += v;
      const long double mean = sum / n;
      for (float v : x) sq += (v - mean) * (v - mean);
      const long double inv = 1.0L / std::sqrt(sq / n + 1e-5L);
      for (int64_t i = 0; i < n; ++i) {
        const long double want = (x[i] - mean) * inv * gamma[i] + (with_beta ? beta[i] : 0.f);
        // The normalised value is rounded to float, then multiplied and added in float.
        const double tol = 4 * std::ldexp(1.0, -24) * (std::fabs(static_cast<double>(want)) + 1);
        ASSERT_NEAR(y[i], static_cast<double>(want), tol) << "n " << n << " i " << i;
      }
    }
}

TEST(Norm, InPlaceGivesTheSameBitsAndAnotherInputAnotherOutput) {
  const int64_t n = 768;
  const auto x = random_floats(n, 6, 0.5f), gamma = random_floats(n, 7, 1.f),
             beta = random_floats(n, 8, 0.f);
  std::vector<float> y(n), z = x;
  layer_norm(x.data(), gamma.data(), beta.data(), y.data(), n, 1e-5);
  layer_norm(z.data(), gamma.data(), beta.data(), z.data(), n, 1e-5);
  EXPECT_EQ(std::memcmp(y.data(), z.data(), n * sizeof(float)), 0);
  auto x2 = x;
  x2[100] += 1.f;
  std::vector<float> y2(n);
  layer_norm(x2.data(), gamma.data(), beta.data(), y2.data(), n, 1e-5);
  int moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += y2[i] != y[i];
  EXPECT_GT(moved, n / 2);  // the mean and the variance moved
}

TEST(Norm, GroupNormIsLayerNormOfEachGroupAndGroupsStayApart) {
  const int groups = 12, size = 64, n = groups * size;
  const auto x = random_floats(n, 9, 2.f), gamma = random_floats(n, 10, 1.f),
             beta = random_floats(n, 11, 0.f);
  std::vector<float> y(n), want(n);
  group_norm(x.data(), gamma.data(), beta.data(), y.data(), groups, size, 64e-5);
  for (int g = 0; g < groups; ++g)
    layer_norm(x.data() + g * size, gamma.data() + g * size, beta.data() + g * size,
               want.data() + g * size, size, 64e-5);
  EXPECT_EQ(std::memcmp(y.data(), want.data(), n * sizeof(float)), 0);
  auto x2 = x;
  x2[3 * size + 5] -= 3.f;  // group 3 only
  std::vector<float> y2(n);
  group_norm(x2.data(), gamma.data(), beta.data(), y2.data(), groups, size, 64e-5);
  for (int i = 0; i < n; ++i) {
    if (i / size == 3) continue;
    ASSERT_EQ(y2[i], y[i]) << i;
  }
  int moved = 0;
  for (int i = 3 * size; i < 4 * size; ++i) moved += y2[i] != y[i];
  EXPECT_GT(moved, size / 2);
}

}  // namespace
}  // namespace wick::kernels
