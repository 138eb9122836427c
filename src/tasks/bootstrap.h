// Percentile bootstrap of a mean: the confidence interval of the KL report
// (docs/rwkvq-format.md §4: 20000 resamples, seed 0, percentiles 2.5 / 97.5). Pure functions;
// safe from any thread.
#pragma once

#include <cstdint>
#include <span>

namespace wick::tasks {

struct Interval {
  double low = 0, high = 0;
};

// The q-quantile (q in [0, 1]) of sorted[0..n), n >= 1, linearly interpolated between order
// statistics at position q * (n - 1) (numpy's default "linear" method).
double quantile_sorted(std::span<const double> sorted, double q);

// Draws `resamples` (>= 1) samples of values.size() (>= 1) values with replacement, each index
// the high 64 bits of SplitMix64::next() * n (wick/rng.h, seeded with `seed`; one generator for
// all draws, samples in order), and returns the quantiles (1 - level) / 2 and (1 + level) / 2,
// level in (0, 1), of the sample means. Deterministic for a given seed.
Interval bootstrap_mean_interval(std::span<const double> values, int resamples, uint64_t seed,
                                 double level);

}  // namespace wick::tasks
