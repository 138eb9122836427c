// Summary statistics of repeated measurements (src/bench, the benchmark library that `wick bench*`
// and bench/ share; README "Benchmarks"). Plain functions of their arguments: thread-safe.
// Units are the caller's: a median of seconds is in seconds.
#pragma once

#include <cstddef>
#include <vector>

namespace wick::bench {

// The median: the middle value of the sorted samples, or the mean of the two middle ones for an
// even count. Empty input: 0 (a benchmark that took no samples reports 0, not garbage).
double median(std::vector<double> samples);

// The q-quantile by nearest rank: sorted[min(n - 1, floor(q * n))], so quantile(v, 0.99) of 100
// samples is the largest but one. q outside [0, 1] is clamped. Empty input: 0.
double quantile(std::vector<double> samples, double q);

// The sample standard deviation (divisor n - 1); 0 for fewer than two samples.
double stddev(const std::vector<double>& samples);

// All of the above at once. `n` = 0 (and every field 0) for empty input.
struct Summary {
  std::size_t n = 0;
  double median = 0, mean = 0, stddev = 0, min = 0, max = 0;
};
Summary summarize(const std::vector<double>& samples);

}  // namespace wick::bench
