// SplitMix64: the one pseudo-random generator of wick (sampling, synthetic checkpoints). Each user
// owns its own instance; there is no process-global RNG. Reference: Steele, Lea & Flood, "Fast
// splittable pseudorandom number generators" (OOPSLA 2014); constants as in the published
// splitmix64.c. docs/tasks.md §1.4 pins the sampling use (seed 0 -> e220a8397b1dcdaf, ...).
//
// Thread-safety: an instance is not synchronised; give each thread its own.
#pragma once

#include <cstdint>

namespace wick {

class SplitMix64 {
 public:
  // The state starts at `seed` unchanged.
  explicit SplitMix64(uint64_t seed = 0) : state_(seed) {}

  // Next 64 random bits (all arithmetic wraps modulo 2^64).
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1] as fp32: the top 53 bits scaled by 2^-53 in double, then rounded to the
  // nearest float - which can give exactly 1.0f (probability about 2^-25; callers allow for it).
  float uniform() { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-53); }

  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace wick
