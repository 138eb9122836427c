#include "kernels/norm.h"

#include <cmath>

namespace wick::kernels {

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t n,
                double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float norm = static_cast<float>((x[i] - mean) * inv);
    y[i] = norm * gamma[i] + (beta ? beta[i] : 0.f);
  }
}

void group_norm(const float* x, const float* gamma, const float* beta, float* y, int groups,
                int size, double eps) {
  for (int g = 0; g < groups; ++g) {
    const int64_t o = static_cast<int64_t>(g) * size;
    double sum = 0;
    for (int i = 0; i < size; ++i) sum += x[o + i];
    const double mean = sum / size;
    double sq = 0;
    for (int i = 0; i < size; ++i) {
      const double d = x[o + i] - mean;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / size + eps);
    for (int i = 0; i < size; ++i) {
      const float norm = static_cast<float>((x[o + i] - mean) * inv);
      y[o + i] = norm * gamma[o + i] + (beta ? beta[o + i] : 0.f);
    }
  }
}

}  // namespace wick::kernels
