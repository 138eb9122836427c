// Models loaded from the fixture .rwkvq files (written by rwkv-quant) against rwkv-quant's fp32
// reference forward on their dequantised weights (tiny_reference_forward.safetensors), through
// the parallel pass and the recurrent step; the two passes and batched vs single passes against
// each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

struct Case {
  const char* file;
  const char* logits;
};
const Case kCases[] = {{"rwkvq/tiny_reduction.rwkvq", "logits.reduction_f32"},
                       {"rwkvq/tiny_compression.rwkvq", "logits.compression_f32"}};

TEST(RwkvqModel, ParallelPassAndRecurrentStepReproduceTheReferenceLogits) {
  io::TensorSet ref = load_fixture_tensors("rwkvq/tiny_reference_forward.safetensors");
  const std::vector<int32_t> tokens = ints(ref, "tokens");
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.file);
    Model m = Model::load(fixture(c.file));
    const std::vector<float> want = floats(ref, c.logits);
    State st = m.new_state();
    const std::vector<float> parallel = m.forward(tokens, st, true);
    const double dp = max_abs_diff(parallel, want);
    State rs = m.new_state();
    std::vector<float> recurrent;
    for (int32_t t : tokens) {
      const std::vector<float> l = m.step(t, rs);
      recurrent.insert(recurrent.end(), l.begin(), l.end());
    }
    const double dr = max_abs_diff(recurrent, want);
    const double dpr = max_abs_diff(parallel, recurrent);
    std::printf("[parity] %s: parallel %.3g, recurrent %.3g, parallel vs recurrent %.3g\n", c.file,
                dp, dr, dpr);
    EXPECT_LE(dp, 1e-4);
    EXPECT_LE(dr, 1e-4);
    EXPECT_LE(dpr, 1e-5);
    // The states after both passes agree too (WKV and both token shifts).
    for (int layer = 0; layer < m.geometry().n_layer; ++layer) {
      const size_t n = static_cast<size_t>(m.geometry().n_head) * m.geometry().head_size * m.geometry().head_size;
      EXPECT_LE(max_abs_diff(st.wkv(layer), rs.wkv(layer), n), 1e-5) << "layer " << layer;
      EXPECT_LE(max_abs_diff(st.att_shift(layer), rs.att_shift(layer), m.geometry().n_embd), 1e-5);
      EXPECT_LE(max_abs_diff(st.ffn_shift(layer), rs.ffn_shift(layer), m.geometry().n_embd), 1e-5);
    }
    // The quantised logits are not the dense ones: the test can tell the models apart.
    EXPECT_GT(max_abs_diff(parallel, floats(ref, "logits.dense_f32")), 1e-3);
  }
}

TEST(RwkvqModel, BatchedRowsEqualSingleSequences) {
  Model m = Model::load(fixture("rwkvq/tiny_compression.rwkvq"));
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7}, b = {200, 0, 255}, c = {9};
  std::vector<std::span<const int32_t>> seqs = {a, b, c};
  std::vector<State> states = {m.new_state(), m.new_state(), m.new_state()};
  std::vector<State*> ptrs = {&states[0], &states[1], &states[2]};
  const std::vector<float> batch = m.forward_batch(seqs, ptrs);
  const int64_t V = m.geometry().vocab;
  for (size_t i = 0; i < seqs.size(); ++i) {
    State s = m.new_state();
    const std::vector<float> single = m.forward(seqs[i], s);
    EXPECT_EQ(std::memcmp(single.data(), batch.data() + i * V, V * sizeof(float)), 0) << i;
  }
  EXPECT_GT(max_abs_diff(batch.data(), batch.data() + V, V), 1e-3);  // different inputs differ
}

// Mean KL(softmax(p) || softmax(q)) per row of V logits, in nats (double).
double mean_kl(const std::vector<float>& p, const std::vector<float>& q, int64_t V) {
  double total = 0;
  const int64_t rows = static_cast<int64_t>(p.size()) / V;
  for (int64_t t = 0; t < rows; ++t) {
    auto log_softmax = [&](const float* l, std::vector<double>& out) {
      double mx = l[0], z = 0;
      for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(l[i]));
      for (int64_t i = 0; i < V; ++i) z += std::exp(double(l[i]) - mx);
      out.resize(V);
      for (int64_t i = 0; i < V; ++i) out[i] = double(l[i]) - mx - std::log(z);
    };
    std::vector<double> lp, lq;
    log_softmax(p.data() + t * V, lp);
    log_softmax(q.data() + t * V, lq);
    for (int64_t i = 0; i < V; ++i) total += std::exp(lp[i]) * (lp[i] - lq[i]);
  }
  return total / static_cast<double>(rows);
}

// Precision::kInt8 on a packed fixture (its projections run the integer kernels: sb6 in
// `compression`, sym in `reduction`): the parallel pass equals the recurrent step and batch rows
// equal single sequences bit for bit, and the logits stay close to rwkv-quant's fp32 reference on
// the same weights - closer than the quantisation of the weights itself moved them from the dense
// model, by `margin` - while differing from wick's fp32 logits (the integer path really runs).
void check_int8_precision(const std::string& preset, double margin) {
  SCOPED_TRACE(preset);
  io::TensorSet ref = load_fixture_tensors("rwkvq/tiny_reference_forward.safetensors");
  const std::vector<int32_t> tokens = ints(ref, "tokens");
  const Model fp32 = Model::load(fixture("rwkvq/tiny_" + preset + ".rwkvq"));
  const Model m = fp32.with_precision(Precision::kInt8);
  const int64_t V = m.geometry().vocab;
  State st = m.new_state();
  const std::vector<float> parallel = m.forward(tokens, st, true);
  State rs = m.new_state();
  std::vector<float> recurrent;
  for (int32_t t : tokens) {
    const std::vector<float> l = m.step(t, rs);
    recurrent.insert(recurrent.end(), l.begin(), l.end());
  }
  ASSERT_EQ(parallel.size(), recurrent.size());
  EXPECT_EQ(std::memcmp(parallel.data(), recurrent.data(), parallel.size() * sizeof(float)), 0);
  const std::vector<int32_t> a(tokens.begin(), tokens.begin() + 7), b = {200, 0, 255};
  std::vector<std::span<const int32_t>> seqs = {a, b};
  std::vector<State> states = {m.new_state(), m.new_state()};
  std::vector<State*> ptrs = {&states[0], &states[1]};
  const std::vector<float> batch = m.forward_batch(seqs, ptrs);
  for (size_t i = 0; i < seqs.size(); ++i) {
    State s = m.new_state();
    const std::vector<float> single = m.forward(seqs[i], s);
    EXPECT_EQ(std::memcmp(single.data(), batch.data() + i * V, V * sizeof(float)), 0) << i;
  }
  // The two sequences' logits differ (the comparison above could not pass on equal rows).
  EXPECT_NE(std::memcmp(batch.data(), batch.data() + V, V * sizeof(float)), 0);
  State s32 = fp32.new_state();
  const std::vector<float> exact = fp32.forward(tokens, s32, true);
  const double kl_int8 = mean_kl(floats(ref, "logits." + preset + "_f32"), parallel, V);
  const double kl_fp32 = mean_kl(floats(ref, "logits." + preset + "_f32"), exact, V);
  const double kl_weights = mean_kl(floats(ref, "logits.dense_f32"), exact, V);
  std::printf("[int8 %s] KL(reference || int8 inputs) %.3g, fp32 inputs %.3g; weights' own %.3g\n",
              preset.c_str(), kl_int8, kl_fp32, kl_weights);
  EXPECT_GT(max_abs_diff(parallel, exact), 0.0);
  EXPECT_LT(kl_int8, kl_weights / margin);
}

TEST(RwkvqModel, Int8PrecisionKeepsThePassesEqualAndStaysNearTheReference) {
  check_int8_precision("compression", 4);
  check_int8_precision("reduction", 2);
}

TEST(RwkvqModel, InfoDescribesThePackedLayouts) {
  Model m = Model::load(fixture("rwkvq/tiny_compression.rwkvq"));
  const ModelInfo& i = m.info();
  EXPECT_EQ(i.container, "rwkvq v2");
  std::map<std::string, uint64_t> layouts(i.packed_parameters.begin(), i.packed_parameters.end());
  EXPECT_EQ(layouts["sb6@5"], 256u * 256 * (1 + 8) + 256u * 256);  // emb, r/k/v/o x2, head
  EXPECT_EQ(layouts["sb6@4"], 2u * 2 * 512 * 256);                 // ffn key/value x2
  EXPECT_GT(layouts["asym@6"], 0u);
  EXPECT_GT(layouts["rtn@8"], 0u);
  ASSERT_EQ(i.dtype_parameters.size(), 1u);
  EXPECT_EQ(i.dtype_parameters[0].first, DType::BF16);
  EXPECT_LT(i.weight_bytes, i.file_bytes);
  EXPECT_EQ(m.geometry().n_embd, 256);
  EXPECT_EQ(m.geometry().lora_w, 96);
  // Another quantisation of the same model has another fingerprint.
  EXPECT_NE(i.fingerprint, Model::load(fixture("rwkvq/tiny_reduction.rwkvq")).info().fingerprint);
}

TEST(RwkvqModel, CliRunsAnRwkvqFile) {
  const std::string model = shell_quote(fixture("rwkvq/tiny_compression.rwkvq"));
  CliRun info = run_wick("info --model " + model + " --json");
  ASSERT_EQ(info.status, 0) << info.err;
  const nlohmann::json j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["container"], "rwkvq v2");
  EXPECT_EQ(j["layouts"]["sb6@4"], 2 * 2 * 512 * 256);
  CliRun gen = run_wick("generate --model " + model + " --prompt 'Hello' --max-tokens 8 --json");
  ASSERT_EQ(gen.status, 0) << gen.err;
  const nlohmann::json g = nlohmann::json::parse(gen.out);
  EXPECT_EQ(g["generated_tokens"], 8);
}

}  // namespace
}  // namespace wick::test
