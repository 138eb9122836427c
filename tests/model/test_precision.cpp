// Precision::kBf16 (wick/model.h) beyond what the trace test checks (test_matmul_inputs.cpp):
// the bf16 rounding itself, and the pass contracts kept under it - forward() rows equal step()
// bit for bit, a batch row equals its sequence alone, and with_precision shares the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/fp16.h"
#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The pass contracts at m's precision: forward(all positions) rows == step() one token at a time
// (state included), and a batch row equals its sequence alone. Returns the last-position logits of
// a and b run alone and a's final state.
struct Alone {
  std::vector<float> la, lb;
  State sa;
};
Alone expect_pass_contracts(const Model& m, const std::vector<int32_t>& a,
                            const std::vector<int32_t>& b) {
  const int64_t V = m.geometry().vocab;
  State sf = m.new_state(), ss = m.new_state();
  const std::vector<float> all = m.forward(a, sf, true);
  for (size_t t = 0; t < a.size(); ++t) {
    const std::vector<float> row = m.step(a[t], ss);
    EXPECT_EQ(0, std::memcmp(row.data(), all.data() + t * V, V * sizeof(float))) << "t=" << t;
  }
  EXPECT_TRUE(sf == ss);

  Alone r{{}, {}, m.new_state()};
  State s2 = m.new_state(), b1 = m.new_state(), b2 = m.new_state();
  r.la = m.forward(a, r.sa);
  r.lb = m.forward(b, s2);
  const std::vector<std::span<const int32_t>> seqs = {a, b};
  std::vector<State*> states = {&b1, &b2};
  const std::vector<float> batch = m.forward_batch(seqs, states);
  EXPECT_EQ(0, std::memcmp(batch.data(), r.la.data(), V * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(batch.data() + V, r.lb.data(), V * sizeof(float)));
  EXPECT_TRUE(b1 == r.sa);
  EXPECT_TRUE(b2 == s2);
  return r;
}

TEST(Precision, Bf16RoundingIsNearestEven) {
  using base::f32_to_bf16;
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);                // tie, even stays
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);      // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);     // above the tie
  EXPECT_EQ(f32_to_bf16(bits_to_float(0x7f7fffffu)), 0x7f80);    // the largest float -> inf
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(bits_to_float(0x7f800001u)), 0x7fc0);    // a NaN that would round to inf
  EXPECT_EQ(f32_to_bf16(bits_to_float(0x00018000u)), 0x0002);    // subnormals kept, tie to even
  std::vector<float> x = {1.0f + 0x1p-7f + 0x1p-8f, -3.14159f, 0.0f, -0.0f}, y(4);
  base::round_to_bf16(x.data(), y.data(), x.size());
  EXPECT_EQ(y[0], 1.0f + 0x1p-6f);
  EXPECT_EQ(y[1], -3.140625f);
  EXPECT_TRUE(y[2] == 0.0f && !std::signbit(y[2]));
  EXPECT_TRUE(y[3] == 0.0f && std::signbit(y[3]));
  base::round_to_bf16(x.data(), x.data(), x.size());  // in place
  EXPECT_EQ(x, y);
}

TEST(Precision, PassesAgreeBitForBitAtBf16) {
  const Model fp32 = Model::load(fixture(kModel));
  LoadOptions o;
  o.precision = Precision::kBf16;
  const Model m = Model::load(fixture(kModel), o);
  ASSERT_EQ(m.precision(), Precision::kBf16);
  EXPECT_EQ(fp32.with_precision(Precision::kBf16).precision(), Precision::kBf16);
  EXPECT_EQ(m.with_precision(Precision::kFp32).precision(), Precision::kFp32);
  const std::vector<int32_t> a = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  const std::vector<int32_t> b = {84, 104, 101, 32, 115, 101, 97};

  const Alone alone = expect_pass_contracts(m, a, b);
  const std::vector<float>& la = alone.la;
  const State& s1 = alone.sa;

  // fp32 and bf16 differ (in the logits and the state), the default precision is fp32, and the
  // fp32 Model derived from the bf16 one is the fp32 model again.
  State f1 = fp32.new_state(), f2 = fp32.new_state();
  const std::vector<float> la32 = fp32.forward(a, f1);
  EXPECT_NE(la32, la);
  EXPECT_FALSE(f1 == s1);
  EXPECT_EQ(fp32.precision(), Precision::kFp32);
  EXPECT_EQ(m.with_precision(Precision::kFp32).forward(a, f2), la32);
}

// bf16 weights at Precision::kBf16 run the BF16 dot product where the CPU has one
// (kernels/dot.h: Bf16DotKernels): the pass contracts hold there too, and the logits stay close
// to those of the fp32 kernels (Precision::kFp32 on the same weights).
TEST(Precision, Bf16WeightsKeepThePassContractsAtBf16) {
  const Model fp32 = synthetic_model("2:128:512", DType::BF16, 5);
  const Model m = fp32.with_precision(Precision::kBf16);
  const std::vector<int32_t> a = {7, 300, 12, 499, 64, 3, 3, 250, 101};
  const std::vector<int32_t> b = {41, 42, 43};
  const int64_t V = m.geometry().vocab;

  const Alone alone = expect_pass_contracts(m, a, b);
  const std::vector<float>&la = alone.la, &lb = alone.lb;

  // Close to fp32 precision (the inputs' rounding is the only approximation), yet not equal.
  State f = fp32.new_state();
  const std::vector<float> la32 = fp32.forward(a, f);
  double num = 0, den = 0;
  for (int64_t i = 0; i < V; ++i) {
    num += (double(la[i]) - la32[i]) * (double(la[i]) - la32[i]);
    den += double(la32[i]) * la32[i];
  }
  EXPECT_LT(std::sqrt(num / den), 2e-2);
  EXPECT_NE(la, la32);
  EXPECT_NE(la, lb);
}

}  // namespace
}  // namespace wick::test
