// The sampler's loops (kernels/sampler_loops.h): every instruction set this CPU has gives the
// scalar build's bits on inputs with NaN, infinities, ties and lengths that are not a multiple of
// the vector width (so the sampler picks the same token from the same logits whatever WICK_ISA
// says), the loops compute what they promise, and the dispatch follows the active level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/sampler_loops.h"
#include "kernels/sampler_math.h"

namespace wick::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<Isa> levels_here() {
  std::vector<Isa> out = {Isa::kScalar};
  if (best_supported_isa() >= Isa::kAvx2) out.push_back(Isa::kAvx2);
  return out;
}

// Logits with the awkward values: NaN, +-inf, exact ties, a wide range.
std::vector<float> logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 6.f);
  std::vector<float> z(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = rng() % 50;
    z[i] = r == 0 ? std::nanf("") : r == 1 ? -kInf : r == 2 ? 3.25f : d(rng);
  }
  return z;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(SamplerLoops, EveryIsaGivesTheScalarBits) {
  const SamplerLoops& ref = sampler_loops_scalar();
  for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{37}, size_t{1000}, size_t{65536}}) {
    const std::vector<float> z = logits(n, static_cast<uint32_t>(n));
    for (const Isa isa : levels_here()) {
      const SamplerLoops& k = sampler_loops_for(isa);
      const std::string what = std::string(isa_name(isa)) + ", n " + std::to_string(n);
      std::vector<float> c1(n), c2(n);
      ref.sanitize_copy(z.data(), c1.data(), n);
      k.sanitize_copy(z.data(), c2.data(), n);
      ASSERT_TRUE(same_bits(c1, c2)) << what;
      const float m1 = ref.max_of(c1.data(), n), m2 = k.max_of(c2.data(), n);
      ASSERT_EQ(std::memcmp(&m1, &m2, sizeof m1), 0) << what;
      std::vector<float> d1 = c1, d2 = c2;
      ASSERT_EQ(ref.divide_and_max(d1.data(), n, 0.7f), k.divide_and_max(d2.data(), n, 0.7f));
      ASSERT_TRUE(same_bits(d1, d2)) << what;
      std::vector<float> e1(n), e2(n);
      std::vector<uint16_t> b1(n), b2(n);
      ref.shift_clamp_bin(c1.data(), n, m1, e1.data(), b1.data());
      k.shift_clamp_bin(c2.data(), n, m2, e2.data(), b2.data());
      ASSERT_TRUE(same_bits(e1, e2) && same_bits(b1, b2)) << what;
      std::vector<float> f1(n), f2(n);
      ref.shift_clamp(c1.data(), n, m1, f1.data());
      k.shift_clamp(c2.data(), n, m2, f2.data());
      ASSERT_TRUE(same_bits(f1, f2) && same_bits(f1, e1)) << what;
      const double s1 = ref.exp_in_place_sum(e1.data(), n), s2 = k.exp_in_place_sum(e2.data(), n);
      ASSERT_EQ(std::memcmp(&s1, &s2, sizeof s1), 0) << what;
      ASSERT_TRUE(same_bits(e1, e2)) << what;
      std::vector<float> p1(n), p2(n);
      ref.probs_and_bins(e1.data(), n, 1 / s1, p1.data(), b1.data());
      k.probs_and_bins(e2.data(), n, 1 / s2, p2.data(), b2.data());
      ASSERT_TRUE(same_bits(p1, p2) && same_bits(b1, b2)) << what;
      std::vector<uint32_t> i1(n), i2(n);
      for (const uint32_t until : {0u, 1u, 40u, 1024u}) {
        const size_t n1 = ref.collect_below(b1.data(), n, until, i1.data());
        ASSERT_EQ(n1, k.collect_below(b2.data(), n, until, i2.data())) << what;
        ASSERT_EQ(std::memcmp(i1.data(), i2.data(), n1 * 4), 0) << what;
      }
      const size_t q1 = ref.collect_equal(b1.data(), n, b1[n / 2], i1.data());
      ASSERT_EQ(q1, k.collect_equal(b2.data(), n, b2[n / 2], i2.data())) << what;
      ASSERT_GE(q1, 1u) << what;
      ASSERT_EQ(std::memcmp(i1.data(), i2.data(), q1 * 4), 0) << what;
      std::vector<uint32_t> u1(n), u2(n);
      for (const bool from_prob : {true, false}) {
        ref.units_of(from_prob, p1.data(), e1.data(), 1 / s1, n, 1 << 20, u1.data());
        k.units_of(from_prob, p2.data(), e2.data(), 1 / s2, n, 1 << 20, u2.data());
        ASSERT_TRUE(same_bits(u1, u2)) << what;
      }
    }
  }
}

TEST(SamplerLoops, TheLoopsComputeWhatTheyPromise) {
  // Against plain scalar statements (the comparison above could pass with every table wrong).
  const SamplerLoops& k = sampler_loops();
  const std::vector<float> z = {1.f, std::nanf(""), -kInf, 4.f, 4.f, -2.f, 0.5f, 3.f, 9.f};
  std::vector<float> c(z.size());
  k.sanitize_copy(z.data(), c.data(), z.size());
  EXPECT_EQ(c[1], -kInf);
  EXPECT_EQ(k.max_of(c.data(), c.size()), 9.f);
  std::vector<float> e(z.size());
  std::vector<uint16_t> bin(z.size());
  k.shift_clamp_bin(c.data(), c.size(), 9.f, e.data(), bin.data());
  EXPECT_EQ(e[2], -100.f);
  EXPECT_EQ(e[3], -5.f);
  EXPECT_EQ(bin[3], 80);  // 5 nats below the max, 16 bins per nat
  EXPECT_EQ(bin[2], kSamplerBins - 1);
  const double sum = k.exp_in_place_sum(e.data(), e.size());
  double direct = 0;
  for (size_t i = 0; i < c.size(); ++i) direct += std::exp(std::max(c[i] - 9.0, -100.0));
  EXPECT_NEAR(sum, direct, 1e-6 * direct);
  EXPECT_EQ(e[8], 1.f);
  std::vector<uint32_t> ids(z.size());
  const size_t n = k.collect_equal(bin.data(), bin.size(), bin[3], ids.data());
  ASSERT_EQ(n, 2u);  // the tie 4, 4
  EXPECT_EQ(ids[0], 3u);
  EXPECT_EQ(ids[1], 4u);
  EXPECT_FLOAT_EQ(exp_clamped(-1.f), std::exp(-1.f));
}

TEST(SamplerLoops, DispatchFollowsTheActiveIsa) {
  EXPECT_EQ(&sampler_loops(), &sampler_loops_for(active_isa()));
  EXPECT_EQ(&sampler_loops_for(Isa::kScalar), &sampler_loops_scalar());
  if (best_supported_isa() >= Isa::kAvx2)
    EXPECT_NE(&sampler_loops_for(Isa::kAvx2), &sampler_loops_scalar());
}

}  // namespace
}  // namespace wick::kernels
