// The matrix-input trace points of Model::forward() ("in.*", include/wick/model.h): each reported
// activation is the one its weight matrix is applied to - checked by applying the stored weight
// (in double) to the traced rows and comparing with the matrix's output as the pass traces or
// returns it - and tracing leaves the model's results unchanged bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

struct Traced {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};

// name + "." + layer -> the traced array; each name/layer must come exactly once.
std::map<std::string, Traced> trace_forward(const Model& m, std::span<const int32_t> tokens,
                                            bool all_positions, std::vector<float>* logits) {
  std::map<std::string, Traced> got;
  const ActivationTrace trace = [&](std::string_view name, int layer, const float* d,
                                    int64_t rows, int64_t cols) {
    const std::string key = std::string(name) + "." + std::to_string(layer);
    EXPECT_EQ(got.count(key), 0u) << key << " reported twice";
    got[key] = Traced{rows, cols, std::vector<float>(d, d + rows * cols)};
  };
  State st = m.new_state();
  *logits = m.forward(tokens, st, all_positions, &trace);
  return got;
}

// A stored weight [OUT, IN] of the fixture widened to float.
std::vector<float> weight(const io::TensorSet& w, const std::string& name) {
  const io::TensorView* t = w.find(name);
  if (!t) throw std::runtime_error("fixture has no " + name);
  return io::to_f32(*t);
}

// y = x @ W^T in double, x [rows, in], W [out, in].
std::vector<double> matmul_t(const std::vector<float>& x, int64_t rows, int64_t in,
                             const std::vector<float>& w, int64_t out) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i)
        s += static_cast<double>(x[t * in + i]) * static_cast<double>(w[o * in + i]);
      y[t * out + o] = s;
    }
  return y;
}

// max |a - b| / max(1, max |b|).
double rel_diff(const std::vector<double>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, scale = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return d / scale;
}

std::vector<int32_t> byte_tokens(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(MatmulInputTrace, EveryInputIsWhatItsMatrixReads) {
  const Model m = Model::load(fixture("rwkvq/tiny_world_dense.safetensors"));
  const io::TensorSet w = load_fixture_tensors("rwkvq/tiny_world_dense.safetensors");
  const Geometry& g = m.geometry();
  const int64_t C = g.n_embd, F = g.ffn_dim, V = g.vocab, H = g.n_head, N = g.head_size;
  ASSERT_NE(F, C);  // the FFN value input has its own width
  const std::vector<int32_t> tokens = byte_tokens("Lighthouse keepers read the sky.");
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<float> logits;
  std::map<std::string, Traced> got = trace_forward(m, tokens, true, &logits);

  auto at = [&](const std::string& name, int layer, int64_t cols) -> const Traced& {
    const std::string key = name + "." + std::to_string(layer);
    EXPECT_EQ(got.count(key), 1u) << key;
    const Traced& t = got[key];
    EXPECT_EQ(t.rows, T) << key;
    EXPECT_EQ(t.cols, cols) << key;
    return t;
  };
  constexpr double kTol = 2e-5;
  for (int l = 0; l < g.n_layer; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    SCOPED_TRACE("layer " + std::to_string(l));
    // receptance: r is traced as the matrix output.
    const Traced& xr = at("in.att.receptance", l, C);
    EXPECT_LE(rel_diff(matmul_t(xr.data, T, C, weight(w, b + "att.receptance.weight"), C),
                       at("r", l, C).data),
              kTol);
    // key: the traced "a" is -normalize(k_raw * k_k) per head.
    const Traced& xk = at("in.att.key", l, C);
    std::vector<double> kk = matmul_t(xk.data, T, C, weight(w, b + "att.key.weight"), C);
    const std::vector<float> k_k = weight(w, b + "att.k_k");
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double ss = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& u = kk[t * C + h * N + n];
          u *= k_k[h * N + n];
          ss += u * u;
        }
        const double norm = std::max(std::sqrt(ss), 1e-12);
        for (int64_t n = 0; n < N; ++n) kk[t * C + h * N + n] /= -norm;
      }
    EXPECT_LE(rel_diff(kk, at("a", l, C).data), kTol);
    // value: layer 0 traces its raw value as v_first.
    const Traced& xv = at("in.att.value", l, C);
    if (l == 0) {
      EXPECT_LE(rel_diff(matmul_t(xv.data, T, C, weight(w, b + "att.value.weight"), C),
                         at("v_first", l, C).data),
                kTol);
    }
    // output: att_out is the W_o product.
    const Traced& xo = at("in.att.output", l, C);
    EXPECT_LE(rel_diff(matmul_t(xo.data, T, C, weight(w, b + "att.output.weight"), C),
                       at("att_out", l, C).data),
              kTol);
    // FFN: relu(key x)^2 is the value input, whose product is ffn_out.
    const Traced& xf = at("in.ffn.key", l, C);
    std::vector<double> h = matmul_t(xf.data, T, C, weight(w, b + "ffn.key.weight"), F);
    for (double& x : h) x = x > 0 ? x * x : 0.0;
    const Traced& xfv = at("in.ffn.value", l, F);
    EXPECT_LE(rel_diff(h, xfv.data), kTol);
    EXPECT_LE(rel_diff(matmul_t(xfv.data, T, F, weight(w, b + "ffn.value.weight"), C),
                       at("ffn_out", l, C).data),
              kTol);
  }
  // head: every position's logits.
  const Traced& xh = at("in.head", -1, C);
  EXPECT_LE(rel_diff(matmul_t(xh.data, T, C, weight(w, "head.weight"), V), logits), kTol);
  // Only the last row without all_positions (copied first: `xh` refers into `got`).
  const std::vector<float> last_row(xh.data.end() - C, xh.data.end());
  std::vector<float> last;
  got = trace_forward(m, tokens, false, &last);
  ASSERT_EQ(got.count("in.head.-1"), 1u);
  EXPECT_EQ(got["in.head.-1"].rows, 1);
  EXPECT_EQ(last_row, got["in.head.-1"].data);
}

TEST(MatmulInputTrace, TracingChangesNoResultBitForBit) {
  const Model m = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  const std::vector<int32_t> tokens = byte_tokens("The old lighthouse stood at the end.");
  int calls = 0;
  const ActivationTrace trace = [&](std::string_view, int, const float*, int64_t, int64_t) {
    ++calls;
  };
  State a = m.new_state(), b = m.new_state();
  const std::vector<float> plain = m.forward(tokens, a, true);
  const std::vector<float> traced = m.forward(tokens, b, true, &trace);
  EXPECT_GT(calls, 0);
  ASSERT_EQ(plain.size(), traced.size());
  EXPECT_EQ(std::memcmp(plain.data(), traced.data(), plain.size() * sizeof(float)), 0);
  for (int l = 0; l < m.geometry().n_layer; ++l) {
    EXPECT_EQ(std::memcmp(a.wkv(l), b.wkv(l), a.wkv_size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(a.att_shift(l), b.att_shift(l), m.geometry().n_embd * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(a.ffn_shift(l), b.ffn_shift(l), m.geometry().n_embd * sizeof(float)), 0);
  }
}

// rows rounded to bf16 (round to nearest even), the form Precision::kBf16 feeds a product.
std::vector<float> bf16_rounded(std::vector<float> x) {
  for (float& v : x) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // the traced rows are finite
    std::memcpy(&v, &u, 4);
  }
  return x;
}

// Rows rounded to 8 bits per superblock of 256 columns (scale max|v| / 127, round half to even),
// the form Precision::kInt8 feeds a product (kernels/int8_inputs.h), written here from the rule.
std::vector<float> int8_rounded(std::vector<float> x, int64_t cols) {
  for (size_t r = 0; r < x.size() / cols; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 256) {
      float* v = x.data() + r * cols + c0;
      const int64_t n = std::min<int64_t>(256, cols - c0);
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(v[i]));
      const float s = amax / 127.0f;
      for (int64_t i = 0; i < n; ++i)
        v[i] = s > 0 ? static_cast<float>(std::nearbyint(v[i] / s)) * s : 0.0f;
    }
  return x;
}

// Precision p (wick/model.h): each large product reads its traced fp32 input rounded by `round`
// - checked against the stored weight applied in double to the rounded rows (and the unrounded
// rows do not explain the output) - while the LoRA branches keep fp32 inputs.
void check_rounded_inputs(Precision p,
                          const std::function<std::vector<float>(std::vector<float>, int64_t)>& round,
                          double miss, double worst_max) {
  const Model fp32 = Model::load(fixture("rwkvq/tiny_world_dense.safetensors"));
  const Model m = fp32.with_precision(p);
  ASSERT_EQ(fp32.precision(), Precision::kFp32);
  ASSERT_EQ(m.precision(), p);
  const io::TensorSet w = load_fixture_tensors("rwkvq/tiny_world_dense.safetensors");
  const Geometry& g = m.geometry();
  const int64_t C = g.n_embd, F = g.ffn_dim, V = g.vocab;
  const std::vector<int32_t> tokens = byte_tokens("Lighthouse keepers read the sky.");
  const int64_t T = static_cast<int64_t>(tokens.size());
  std::vector<float> logits, logits32;
  std::map<std::string, Traced> got = trace_forward(m, tokens, true, &logits);
  std::map<std::string, Traced> got32 = trace_forward(fp32, tokens, true, &logits32);
  auto at = [&](const std::string& name, int layer) -> const Traced& {
    const std::string key = name + "." + std::to_string(layer);
    EXPECT_EQ(got.count(key), 1u) << key;
    return got[key];
  };
  constexpr double kTol = 2e-5;
  // Rounded input explains the output to kTol; the unrounded one misses by more than `miss`.
  auto check = [&](const std::string& in, const std::string& out, int layer,
                   const std::string& weight_name, int64_t n_in, int64_t n_out) {
    SCOPED_TRACE(in + " layer " + std::to_string(layer));
    const Traced& x = at(in, layer);
    const std::vector<float>& y = out == "logits" ? logits : at(out, layer).data;
    const std::vector<float> wt = weight(w, weight_name);
    EXPECT_LE(rel_diff(matmul_t(round(x.data, n_in), T, n_in, wt, n_out), y), kTol);
    EXPECT_GT(rel_diff(matmul_t(x.data, T, n_in, wt, n_out), y), miss);
  };
  for (int l = 0; l < g.n_layer; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    check("in.att.receptance", "r", l, b + "att.receptance.weight", C, C);
    check("in.att.output", "att_out", l, b + "att.output.weight", C, C);
    check("in.ffn.value", "ffn_out", l, b + "ffn.value.weight", F, C);
  }
  check("in.head", "logits", -1, "head.weight", C, V);
  // Layer 0's decay comes from a LoRA branch whose input (the token-shifted LayerNorm of the
  // embedding) nothing rounded: the same bits at either precision - LoRA inputs are not rounded.
  ASSERT_EQ(got.count("w_logdecay.0"), 1u);
  EXPECT_EQ(got["w_logdecay.0"].data, got32["w_logdecay.0"].data);
  // ... while layer 0's receptance, a large product of the same rows, changes.
  EXPECT_NE(got["r.0"].data, got32["r.0"].data);
  // Rounded inputs move the logits, but only a little.
  double worst = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(logits[i] - logits32[i])));
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, worst_max);
  std::cout << "[          ] " << precision_name(p)
            << " precision: max |logit - fp32 logit| = " << worst << "\n";
}

TEST(MatmulInputTrace, Bf16PrecisionRoundsTheInputsOfTheLargeProducts) {
  check_rounded_inputs(
      Precision::kBf16, [](std::vector<float> x, int64_t) { return bf16_rounded(std::move(x)); },
      1e-4, 0.5);
}

// Precision::kInt8 on dense weights: the products take the rounded values as floats.
TEST(MatmulInputTrace, Int8PrecisionRoundsTheInputsOfTheLargeProductsPerSuperblock) {
  check_rounded_inputs(Precision::kInt8, int8_rounded, 1e-4, 1.0);
}

}  // namespace
}  // namespace wick::test
