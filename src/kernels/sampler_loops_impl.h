// The sampler's loops (kernels/sampler_loops.h), written once: each sampler_loops*.cpp includes
// this file, compiled for its instruction set with -ffp-contract=off, and returns make_table(NAME).
// The definitions live in an unnamed namespace, so every file has its own copy.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/sampler_loops.h"
#include "kernels/sampler_math.h"

namespace wick::kernels {
namespace {

constexpr float kInfinity = std::numeric_limits<float>::infinity();

// Largest value of x[0, n), NaN ignored (-inf if none); with kDivide, first replaces every x[i]
// by x[i] / divisor (the max of the quotients is the quotient of the max: division by a positive
// number is monotone). SSE2 (in every x86-64 build): compilers do not vectorise this reduction
// without -ffast-math, and _mm_max_ps(v, m) = (v > m ? v : m) is exactly the scalar rule.
template <bool kDivide>
float max_impl(float* x, size_t n, float divisor) {
  size_t i = 0;
  float r = -kInfinity;
#if defined(__SSE2__)
  __m128 m = _mm_set1_ps(-kInfinity);
  const __m128 d = _mm_set1_ps(divisor);
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_loadu_ps(x + i);
    if constexpr (kDivide) {
      v = _mm_div_ps(v, d);
      _mm_storeu_ps(x + i, v);
    }
    m = _mm_max_ps(v, m);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, m);
  for (float v : lanes) r = v > r ? v : r;
#endif
  for (; i < n; ++i) {
    if constexpr (kDivide) x[i] = x[i] / divisor;
    r = x[i] > r ? x[i] : r;
  }
  return r;
}

float loop_max_of(const float* x, size_t n) {
  return max_impl<false>(const_cast<float*>(x), n, 1);  // not written without kDivide
}

float loop_divide_and_max(float* x, size_t n, float divisor) {
  return divisor == 1 ? max_impl<false>(x, n, 1) : max_impl<true>(x, n, divisor);  // x / 1 == x
}

void loop_sanitize_copy(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = in[i] == in[i] ? in[i] : -kInfinity;
}

void loop_shift_clamp(const float* z, size_t n, float max, float* e) {
  for (size_t i = 0; i < n; ++i) {
    const float d = z[i] - max;
    e[i] = d > -100.f ? d : -100.f;
  }
}

void loop_shift_clamp_bin(const float* z, size_t n, float max, float* e, uint16_t* bin) {
  for (size_t i = 0; i < n; ++i) {
    const float d = z[i] - max;  // fl(z - max) = -fl(max - z)
    float b = d * -16.f;
    b = b < static_cast<float>(kSamplerBins - 1) ? b : static_cast<float>(kSamplerBins - 1);
    bin[i] = static_cast<uint16_t>(static_cast<int>(b));
    e[i] = d > -100.f ? d : -100.f;
  }
}

// (One loop over blocks of 8: it vectorises.)
double loop_exp_in_place_sum(float* e, size_t n) {
  double a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float v = exp_clamped(e[i + j]);
      e[i + j] = v;
      a[j] += v;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const float v = exp_clamped(e[i]);
    e[i] = v;
    a[j] += v;
  }
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

void loop_probs_and_bins(const float* e, size_t n, double inv_sum, float* p, uint16_t* bin) {
  for (size_t i = 0; i < n; ++i) {
    const float x = prob_of(e[i], inv_sum);
    p[i] = x;
    const uint32_t b = (0x3F800000u - std::bit_cast<uint32_t>(x)) >> 19;  // x <= 1
    bin[i] = static_cast<uint16_t>(b < kSamplerBins - 1u ? b : kSamplerBins - 1u);
  }
}

// Four 16-bit bins per 64-bit word: lane v < until iff (v | 0x8000) - until has its top bit clear
// (v, until <= 1024, so no borrow crosses lanes); words without such a lane are skipped.
size_t loop_collect_below(const uint16_t* bin, size_t n, uint32_t until, uint32_t* out) {
  constexpr uint64_t kTop = 0x8000800080008000ull;
  const uint64_t limit = until * 0x0001000100010001ull;
  size_t count = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    uint64_t word;
    std::memcpy(&word, bin + i, sizeof word);
    if ((~((word | kTop) - limit) & kTop) == 0) continue;
    for (size_t j = i; j < i + 4; ++j) {
      if (bin[j] < until) out[count++] = static_cast<uint32_t>(j);
    }
  }
  for (; i < n; ++i) {
    if (bin[i] < until) out[count++] = static_cast<uint32_t>(i);
  }
  return count;
}

// A word has a zero 16-bit lane after XOR with the value iff (y - 0x0001...) & ~y & 0x8000... is
// non-zero.
size_t loop_collect_equal(const uint16_t* bin, size_t n, uint16_t value, uint32_t* out) {
  constexpr uint64_t kOne = 0x0001000100010001ull, kTop = 0x8000800080008000ull;
  const uint64_t pattern = value * kOne;
  size_t count = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    uint64_t word;
    std::memcpy(&word, bin + i, sizeof word);
    const uint64_t y = word ^ pattern;
    if (((y - kOne) & ~y & kTop) == 0) continue;
    for (size_t j = i; j < i + 4; ++j) {
      if (bin[j] == value) out[count++] = static_cast<uint32_t>(j);
    }
  }
  for (; i < n; ++i) {
    if (bin[i] == value) out[count++] = static_cast<uint32_t>(i);
  }
  return count;
}

// 2^30 ulps leave any binade, so a bin holding a tie is never summed from the table. (A run-time
// flag: the branch is loop-invariant and unswitched.)
void loop_units_of(bool from_prob, const float* prob, const float* ex, double inv_sum, size_t n,
                   double per_ulp, uint32_t* units) {
  for (size_t i = 0; i < n; ++i) {
    const float p = from_prob ? prob[i] : prob_of(ex[i], inv_sum);
    const double t = static_cast<double>(p) * per_ulp;  // exact
    const int32_t k = static_cast<int32_t>(t + 0.5);
    const bool tie = static_cast<double>(k) - t == 0.5;
    units[i] = tie ? (1u << 30) : static_cast<uint32_t>(k);
  }
}

// The table of this file's build, named `name` (each file passes one name).
const SamplerLoops& make_table(const char* name) {
  static const SamplerLoops table{loop_max_of,
                                  loop_divide_and_max,
                                  loop_sanitize_copy,
                                  loop_shift_clamp,
                                  loop_shift_clamp_bin,
                                  loop_exp_in_place_sum,
                                  loop_probs_and_bins,
                                  loop_collect_below,
                                  loop_collect_equal,
                                  loop_units_of,
                                  name};
  return table;
}

}  // namespace
}  // namespace wick::kernels
