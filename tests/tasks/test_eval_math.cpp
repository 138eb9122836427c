// The per-position arithmetic and the bootstrap of the evaluation protocol (src/tasks):
// log-sum-exp, NLL, KL of two rows, argmax, quantiles and the percentile bootstrap.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tasks/bootstrap.h"
#include "tasks/logit_rows.h"

namespace wick::tasks {
namespace {

TEST(EvalMath, LogSumExpAndNll) {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  const double want = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(logsumexp(row.data(), 3), want, 1e-15);
  EXPECT_NEAR(nll(row.data(), 3, 0), want - 1.0, 1e-15);
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(logsumexp(big.data(), 2), 1000.0 + std::log(2.0), 1e-12);
  // Non-finite logits give non-finite results (the caller turns them into one error).
  const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(logsumexp(nan.data(), 2)));
  const std::vector<float> inf = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(std::isfinite(nll(inf.data(), 2, 0)));
}

TEST(EvalMath, KlOfTwoRows) {
  std::vector<double> scratch(3);
  const std::vector<float> p = {0.5f, -1.0f, 2.0f};
  EXPECT_EQ(kl(p.data(), p.data(), 3, scratch.data()), 0.0);
  // Shifting every logit by a constant does not change the distribution.
  const std::vector<float> shifted = {10.5f, 9.0f, 12.0f};
  EXPECT_NEAR(kl(p.data(), shifted.data(), 3, scratch.data()), 0.0, 1e-14);
  // Two tokens: P = softmax(0, 0) = (1/2, 1/2), Q = softmax(0, ln 3) = (1/4, 3/4):
  // KL = 1/2 ln 2 + 1/2 ln(2/3).
  const std::vector<float> p2 = {0.0f, 0.0f};
  const std::vector<float> q2 = {0.0f, static_cast<float>(std::log(3.0))};
  const double want = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  EXPECT_NEAR(kl(p2.data(), q2.data(), 2, scratch.data()), want, 1e-7);  // ln 3 rounded to fp32
  // A token the reference cannot produce (P = 0) adds nothing, even where Q is 0 too.
  const std::vector<float> p3 = {0.0f, -std::numeric_limits<float>::infinity()};
  const std::vector<float> q3 = {0.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(kl(p3.data(), q3.data(), 2, scratch.data()), 0.0);
  // exp(-800) underflows to 0 in double: P = (1, 0), Q = (1/2, 1/2), KL = ln 2.
  const std::vector<float> p4 = {0.0f, -800.0f};
  const std::vector<float> q4 = {0.0f, 0.0f};
  EXPECT_NEAR(kl(p4.data(), q4.data(), 2, scratch.data()), std::log(2.0), 1e-15);
  // A NaN logit makes the KL NaN.
  const std::vector<float> q5 = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(kl(p4.data(), q5.data(), 2, scratch.data())));
}

TEST(EvalMath, ArgmaxTiesGoToTheLowestIndex) {
  const std::vector<float> a = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(argmax(a.data(), 4), 1);
  const std::vector<float> b = {std::numeric_limits<float>::quiet_NaN(), -1.0f, -2.0f};
  EXPECT_EQ(argmax(b.data(), 3), 1);
  const std::vector<float> c = {5.0f};
  EXPECT_EQ(argmax(c.data(), 1), 0);
}

TEST(EvalMath, QuantilesInterpolateLinearly) {
  const std::vector<double> s = {1, 2, 3, 4, 5};
  EXPECT_EQ(quantile_sorted(s, 0.0), 1);
  EXPECT_EQ(quantile_sorted(s, 1.0), 5);
  EXPECT_EQ(quantile_sorted(s, 0.5), 3);
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.025), 1.1);   // position 0.1
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.975), 4.9);   // position 3.9
  const std::vector<double> one = {7};
  EXPECT_EQ(quantile_sorted(one, 0.3), 7);
}

TEST(EvalMath, BootstrapIsDeterministicAndCoversTheMean) {
  // 40 values spread over [0, 1) (a low-discrepancy sequence), so that resample means rarely tie.
  std::vector<double> v;
  for (int i = 1; i <= 40; ++i) v.push_back(std::fmod(i * 0.6180339887498949, 1.0));
  const Interval a = bootstrap_mean_interval(v, 20000, 0, 0.95);
  const Interval b = bootstrap_mean_interval(v, 20000, 0, 0.95);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  const double se = std::sqrt(var / v.size() / v.size());  // of the resample mean
  EXPECT_LT(a.low, mean);
  EXPECT_GT(a.high, mean);
  // Nearly normal resample means: the 95 % interval is about mean +- 1.96 se.
  EXPECT_NEAR(a.low, mean - 1.96 * se, 0.1 * se);
  EXPECT_NEAR(a.high, mean + 1.96 * se, 0.1 * se);
  const Interval other = bootstrap_mean_interval(v, 20000, 1, 0.95);
  EXPECT_NE(other.low, a.low);
  const Interval narrow = bootstrap_mean_interval(v, 20000, 0, 0.5);
  EXPECT_GT(narrow.low, a.low);
  EXPECT_LT(narrow.high, a.high);
  const std::vector<double> constant(5, 0.25);
  const Interval c = bootstrap_mean_interval(constant, 100, 0, 0.95);
  EXPECT_EQ(c.low, 0.25);
  EXPECT_EQ(c.high, 0.25);
}

}  // namespace
}  // namespace wick::tasks
