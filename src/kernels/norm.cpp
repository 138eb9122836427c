#include "kernels/norm.h"

#include <cmath>

namespace wick::kernels {
namespace {

// Partial sums per row: element i goes to partial i % kPartials, each partial summed in order and
// the partials combined in one fixed tree, so the compiler keeps them in vector registers without
// reassociating anything (the same bits on every instruction set and for every row).
constexpr int kPartials = 8;

double combine(const double (&p)[kPartials]) {
  return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

// The mean of x[0, n) and 1 / sqrt(biased variance + eps), both in double.
void moments(const float* x, int64_t n, double eps, double& mean, double& inv) {
  double p[kPartials] = {};
  int64_t i = 0;
  for (; i + kPartials <= n; i += kPartials)
    for (int j = 0; j < kPartials; ++j) p[j] += x[i + j];
  for (int j = 0; i < n; ++i, ++j) p[j] += x[i];
  mean = combine(p) / static_cast<double>(n);
  double q[kPartials] = {};
  for (i = 0; i + kPartials <= n; i += kPartials)
    for (int j = 0; j < kPartials; ++j) {
      const double d = x[i + j] - mean;
      q[j] += d * d;
    }
  for (int j = 0; i < n; ++i, ++j) {
    const double d = x[i] - mean;
    q[j] += d * d;
  }
  inv = 1.0 / std::sqrt(combine(q) / static_cast<double>(n) + eps);
}

}  // namespace

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t n,
                double eps) {
  double mean = 0, inv = 0;
  moments(x, n, eps, mean, inv);
  for (int64_t i = 0; i < n; ++i) {
    const float norm = static_cast<float>((x[i] - mean) * inv);
    y[i] = norm * gamma[i] + (beta ? beta[i] : 0.f);
  }
}

void group_norm(const float* x, const float* gamma, const float* beta, float* y, int groups,
                int size, double eps) {
  for (int g = 0; g < groups; ++g) {
    const int64_t o = static_cast<int64_t>(g) * size;
    layer_norm(x + o, gamma + o, beta ? beta + o : nullptr, y + o, size, eps);
  }
}

}  // namespace wick::kernels
