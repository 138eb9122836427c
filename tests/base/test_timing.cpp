// base/timing.h: ms_between is the signed difference in milliseconds; a Stopwatch never runs
// backwards and measures a sleep.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <type_traits>

#include "base/timing.h"
#include "wick/engine.h"

namespace wick::base {
namespace {

TEST(Timing, MsBetweenIsTheSignedDifference) {
  const SteadyClock::time_point t = SteadyClock::now();
  EXPECT_DOUBLE_EQ(ms_between(t, t + std::chrono::microseconds(2500)), 2.5);
  EXPECT_DOUBLE_EQ(ms_between(t + std::chrono::seconds(1), t), -1000.0);
  // The engine's clock is the same steady clock (its timings go through ms_between).
  static_assert(std::is_same_v<EngineClock, SteadyClock>);
}

TEST(Timing, StopwatchMeasuresASleep) {
  const Stopwatch sw;
  const double first = sw.elapsed_ms();
  EXPECT_GE(first, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double second = sw.elapsed_ms();
  EXPECT_GE(second, 20.0);
  EXPECT_GE(second, first);
  EXPECT_LE(sw.start(), SteadyClock::now());
}

}  // namespace
}  // namespace wick::base
