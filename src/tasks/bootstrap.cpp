#include "tasks/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "wick/rng.h"

namespace wick::tasks {

double quantile_sorted(std::span<const double> sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

Interval bootstrap_mean_interval(std::span<const double> values, int resamples, uint64_t seed,
                                 double level) {
  const uint64_t n = values.size();
  SplitMix64 rng(seed);
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& mean : means) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t index =
          static_cast<uint64_t>((static_cast<unsigned __int128>(rng.next()) * n) >> 64);
      sum += values[index];
    }
    mean = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  return {quantile_sorted(means, (1 - level) / 2), quantile_sorted(means, (1 + level) / 2)};
}

}  // namespace wick::tasks
