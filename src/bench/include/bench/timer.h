// Wall-clock timing for benchmarks (wick's benchmark library): a monotonic clock
// (std::chrono::steady_clock, never adjusted) and helpers that time a callable. Thread-safe (no
// state); the time of a callable includes everything it does, so keep set-up outside it.
#pragma once

#include <chrono>
#include <utility>
#include <vector>

#include "bench/stats.h"

namespace wick::bench {

using Clock = std::chrono::steady_clock;

// Seconds / milliseconds elapsed since t0.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
inline double ms_since(Clock::time_point t0) {
  return 1000.0 * seconds_since(t0);
}

// Seconds one call of fn() takes.
template <typename Fn>
double seconds_of(Fn&& fn) {
  const Clock::time_point t0 = Clock::now();
  std::forward<Fn>(fn)();
  return seconds_since(t0);
}

// Milliseconds of fn(), the median of `reps` calls (reps < 1 counts as 1).
template <typename Fn>
double median_ms_of(int reps, Fn&& fn) {
  std::vector<double> ms;
  for (int r = 0; r < (reps < 1 ? 1 : reps); ++r) ms.push_back(1000.0 * seconds_of(fn));
  return median(std::move(ms));
}

}  // namespace wick::bench
