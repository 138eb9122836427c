// The time mix's gate loops (kernels/gate_loops.h): the logistic against the double-precision one,
// each loop against its formula in double, and every instruction set's build bit for bit against
// the baseline one (lengths that leave every tail of the vector loops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/exp_math.h"
#include "kernels/gate_loops.h"

namespace wick::kernels {
namespace {

double logistic(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Every 127th float from -110 to 110 (both signs, the underflow of e^-|x| near -87 and the
// saturation to 1 included): within 3 units in the last place where the result is a normal float,
// within FLT_MIN below that. Special values: +-inf, NaN, +-0.
TEST(GateLoops, SigmoidMatchesTheDoubleLogistic) {
  const float tiny = std::numeric_limits<float>::min();
  double worst_ulps = 0;
  int64_t checked = 0;
  for (const float sign : {1.f, -1.f}) {
    for (uint32_t u = 0; u <= bits_of(110.f); u += 127) {
      float x;
      std::memcpy(&x, &u, sizeof x);
      x *= sign;
      const double ref = logistic(x);
      const float got = sigmoid(x);
      const double ulp = ref * std::numeric_limits<float>::epsilon();
      const double err = std::abs(static_cast<double>(got) - ref);
      if (ref >= tiny) {
        worst_ulps = std::max(worst_ulps, err / ulp);
        ASSERT_LE(err, 3 * ulp) << "x = " << x << ": " << got << " against " << ref;
      } else {
        ASSERT_LE(err, tiny) << "x = " << x;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 15000000);
  EXPECT_GT(worst_ulps, 0.0);  // the comparison measures something: not every value is exact
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sigmoid(inf), 1.f);
  EXPECT_EQ(sigmoid(-inf), 0.f);
  EXPECT_EQ(sigmoid(0.f), 0.5f);
  EXPECT_EQ(sigmoid(-0.f), 0.5f);
  EXPECT_TRUE(std::isnan(sigmoid(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NE(sigmoid(0.25f), sigmoid(0.5f));  // a different input gives a different output
}

struct GateInputs {
  std::vector<float> w0, a0, k_k, k, w, a, v0, gate_in, first, v, g;
};

GateInputs make_inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  GateInputs in;
  for (auto* v : {&in.w0, &in.a0, &in.k_k, &in.k, &in.w, &in.a, &in.v0, &in.gate_in, &in.first,
                  &in.v, &in.g}) {
    v->resize(n);
    for (auto& f : *v) f = nd(rng);
  }
  // The ends of the logistic's range on its input paths (the -100 clamp, e^-|x| underflowing near
  // -87.7, saturation, infinities), one per element, never two infinities that would meet.
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {-inf, inf, -200.f, 200.f, -100.f, 100.f, -87.5f, 87.5f, -88.f, 1e-30f};
  for (size_t i = 0; i < n && i < std::size(edges); ++i) {
    in.w[i] = edges[i];
    in.a[(i + 3) % n] = edges[i];
    in.gate_in[(i + 5) % n] = edges[i];
    in.g[i] = edges[i];
  }
  return in;
}

// Runs all three loops of `t` on a copy of `in`; returns every output, concatenated.
std::vector<float> run_gates(const GateLoops& t, GateInputs in) {
  const size_t n = in.w.size();
  std::vector<float> kk(n);
  t.decay_rate_key(in.w0.data(), in.a0.data(), in.k_k.data(), in.k.data(), in.w.data(),
                   in.a.data(), kk.data(), n);
  t.value_residual(in.v0.data(), in.gate_in.data(), in.first.data(), in.v.data(), n);
  t.sigmoid_in_place(in.g.data(), n);
  std::vector<float> out;
  for (const auto* v : {&in.w, &in.a, &kk, &in.v, &in.g}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

TEST(GateLoops, EveryIsaGivesTheBaselineBitsAndTheFormulas) {
  for (const size_t n : {size_t{1}, size_t{7}, size_t{16}, size_t{37}, size_t{768}}) {
    const GateInputs in = make_inputs(n, 5 + static_cast<uint32_t>(n));
    const std::vector<float> base = run_gates(gate_loops_scalar(), in);
    // The formulas in double (docs/x070-math.md §4), within a few units in the last place.
    for (size_t c = 0; c < n; ++c) {
      const double w = std::exp(-static_cast<double>(kDecayScale) * logistic(in.w0[c] + in.w[c]));
      const double a = logistic(in.a0[c] + in.a[c]);
      const double kk = static_cast<double>(in.k[c]) * in.k_k[c];
      const double v =
          in.v[c] + (static_cast<double>(in.first[c]) - in.v[c]) * logistic(in.v0[c] + in.gate_in[c]);
      const double g = logistic(in.g[c]);
      EXPECT_NEAR(base[c], w, 4e-7 * w) << c;
      EXPECT_NEAR(base[n + c], a, 4e-7 * a + 1e-37) << c;
      EXPECT_EQ(base[2 * n + c], static_cast<float>(kk)) << c;
      // (a sum of terms of the inputs' size: within a few units in the last place of those)
      EXPECT_NEAR(base[3 * n + c], v, 1e-6 * (std::abs(in.v[c]) + std::abs(in.first[c] - in.v[c])))
          << c;
      EXPECT_NEAR(base[4 * n + c], g, 4e-7 * g + 1e-37) << c;
    }
    for (const Isa isa : isas_of_this_cpu()) {
      const std::vector<float> got = run_gates(gate_loops_for(isa), in);
      ASSERT_EQ(got.size(), base.size());
      EXPECT_EQ(std::memcmp(got.data(), base.data(), base.size() * sizeof(float)), 0)
          << isa_name(isa) << ", n = " << n;
    }
  }
  // The comparison can fail: another input changes the outputs.
  GateInputs other = make_inputs(37, 42);
  const std::vector<float> a = run_gates(gate_loops_scalar(), other);
  other.w[20] += 1.f;  // (past the edge values)
  EXPECT_NE(run_gates(gate_loops_scalar(), other), a);
}

}  // namespace
}  // namespace wick::kernels
