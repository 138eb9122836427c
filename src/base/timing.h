// Wall-clock timing of the base layer: the steady clock, milliseconds between two of its points
// and a stopwatch. For the timings a result reports (engine queue / prefill / decode times, the
// sampler's share); the benchmark machinery (medians, repetitions) is not here.
#pragma once

#include <chrono>

namespace wick::base {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds from `from` to `to` (negative when `to` is earlier).
inline double ms_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Started when constructed; reads the milliseconds since then.
class Stopwatch {
 public:
  Stopwatch() : start_(SteadyClock::now()) {}
  double elapsed_ms() const { return ms_between(start_, SteadyClock::now()); }
  SteadyClock::time_point start() const { return start_; }

 private:
  SteadyClock::time_point start_;
};

}  // namespace wick::base
