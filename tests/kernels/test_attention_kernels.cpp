// The attention inner loops (kernels/attention_kernels.h): each instruction set against a float64
// computation of the same sums, on cache rows of several heads (stride > 64) and odd ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention_kernels.h"
#include "wick/rng.h"

namespace wick::kernels {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return v;
}

TEST(AttentionKernels, EveryIsaMatchesFloat64) {
  const size_t stride = 3 * kAttentionHead;  // three heads per cache row
  const int64_t rows = 301;
  const std::vector<float> q = random_floats(kAttentionHead, 1), k = random_floats(rows * stride, 2),
                           v = random_floats(rows * stride, 3), w = random_floats(rows, 4);
  const int64_t begin = 7, end = 290;
  const size_t head = kAttentionHead;  // test the second head of each row
  std::vector<double> ref_scores(end - begin);
  std::vector<double> ref_acc(kAttentionHead, 0.5);
  for (int64_t p = begin; p < end; ++p) {
    double s = 0;
    for (int n = 0; n < kAttentionHead; ++n) s += double(q[n]) * k[p * stride + head + n];
    ref_scores[p - begin] = s * 0.125;
    for (int n = 0; n < kAttentionHead; ++n) ref_acc[n] += double(w[p - begin]) * v[p * stride + head + n];
  }
  for (const AttentionKernels* ak : {&attention_kernels_scalar(), &attention_kernels()}) {
    std::vector<float> scores(end - begin), acc(kAttentionHead, 0.5f);
    ak->scores(q.data(), k.data() + head, stride, begin, end, 0.125f, scores.data());
    ak->accumulate(w.data(), v.data() + head, stride, begin, end, acc.data());
    double ds = 0, da = 0;
    for (size_t i = 0; i < scores.size(); ++i) ds = std::max(ds, std::abs(scores[i] - ref_scores[i]));
    for (int n = 0; n < kAttentionHead; ++n) da = std::max(da, std::abs(acc[n] - ref_acc[n]));
    EXPECT_LT(ds, 1e-5);
    EXPECT_LT(da, 1e-4);  // sums of 283 terms of magnitude <= 1
    // Another query gives other scores.
    std::vector<float> other(end - begin);
    const std::vector<float> q2 = random_floats(kAttentionHead, 9);
    ak->scores(q2.data(), k.data() + head, stride, begin, end, 0.125f, other.data());
    EXPECT_NE(other, scores);
  }
}

// The instruction sets agree with each other (to rounding: their summation orders differ).
TEST(AttentionKernels, ActiveIsaAgreesWithTheScalarReference) {
  const size_t stride = 2 * kAttentionHead;
  const int64_t rows = 97;
  const std::vector<float> q = random_floats(kAttentionHead, 11), k = random_floats(rows * stride, 12),
                           v = random_floats(rows * stride, 13), w = random_floats(rows, 14);
  std::vector<float> s0(rows), s1(rows), a0(kAttentionHead, 0.f), a1(kAttentionHead, 0.f);
  attention_kernels_scalar().scores(q.data(), k.data(), stride, 0, rows, 0.125f, s0.data());
  attention_kernels().scores(q.data(), k.data(), stride, 0, rows, 0.125f, s1.data());
  attention_kernels_scalar().accumulate(w.data(), v.data(), stride, 0, rows, a0.data());
  attention_kernels().accumulate(w.data(), v.data(), stride, 0, rows, a1.data());
  for (int64_t i = 0; i < rows; ++i) EXPECT_NEAR(s0[i], s1[i], 1e-6);
  for (int n = 0; n < kAttentionHead; ++n) EXPECT_NEAR(a0[n], a1[n], 1e-5);
}

}  // namespace
}  // namespace wick::kernels
