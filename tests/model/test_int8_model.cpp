// Models loaded with LoadOptions::quantize = kInt8 (model/int8_linear.h) on the tiny-rwkv7
// fixture: which matrices are converted, the ModelInfo accounting and fingerprint, forward rows
// bit-identical to step() (and to the batched passes), the KL of the int8 model to the dense one
// over the fixture sequences (printed: "int8 KL"), state files across the two, and the refusals
// (a .rwkvq file, a non-finite weight).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/int8_linear.h"
#include "model/model_impl.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/state_file.h"
#include "wick/synth.h"

namespace wick {
namespace {

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";

LoadOptions int8_options() {
  LoadOptions o;
  o.quantize = WeightQuantization::kInt8;
  return o;
}

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

TEST(Int8Model, ConvertsExactlyTheListedMatrices) {
  auto mapped = io::MappedFile::open(test::fixture(kModel));
  auto impl = model::build_model(io::read_safetensors(mapped), "", "");
  model::quantize_model_int8(*impl, test::test_pool());
  model::ModelWeights& w = impl->weights;
  const std::vector<model::Int8Target> targets = model::int8_targets(w);
  ASSERT_EQ(targets.size(), 12u * 6 + 1);
  EXPECT_EQ(targets[0].name, "blocks.0.att.receptance.weight");
  EXPECT_EQ(targets[5].name, "blocks.0.ffn.value.weight");
  EXPECT_EQ(targets.back().name, "head.weight");
  for (const model::Int8Target& t : targets)
    EXPECT_NE(dynamic_cast<const model::Int8Linear*>(t.slot->get()), nullptr) << t.name;
  // The LoRA branches and the embedding stay as stored.
  for (const model::LayerWeights& L : w.layers) {
    for (const auto* lin : {&L.w1, &L.w2, &L.a1, &L.a2, &L.g1, &L.g2})
      EXPECT_NE(dynamic_cast<const model::DenseLinear*>(lin->get()), nullptr);
  }
  EXPECT_NE(dynamic_cast<const model::DenseEmbedding*>(w.emb.get()), nullptr);
  // Converting twice is refused (all or nothing: nothing changes).
  EXPECT_THROW(model::quantize_weights_int8(w, "x", test::test_pool()), CheckpointError);
}

// Each converted matrix's dense bytes are handed to `release` once, right after it is quantised
// (quantize_model_int8 gives their pages back to the system); the model computes the same after
// that as a model converted without releasing anything.
TEST(Int8Model, HandsBackTheDenseBytesOfEveryConvertedMatrix) {
  auto mapped = io::MappedFile::open(test::fixture(kModel));
  auto impl = model::build_model(io::read_safetensors(mapped), "", "");
  std::vector<std::pair<const void*, size_t>> released;
  const model::Int8Conversion c = model::quantize_weights_int8(
      impl->weights, "x", test::test_pool(),
      [&](const void* data, size_t bytes) { released.emplace_back(data, bytes); });
  ASSERT_EQ(released.size(), 12u * 6 + 1);  // the fixture's head is not tied to the embedding
  size_t total = 0;
  for (const auto& [data, bytes] : released) {
    total += bytes;
    const auto* p = static_cast<const uint8_t*>(data);
    EXPECT_TRUE(p >= mapped->data() && p + bytes <= mapped->data() + mapped->size());
  }
  EXPECT_EQ(total, c.released_bytes);

  // Loaded through Model::load (pages released) vs converted here (nothing released).
  const Model q = Model::load(test::fixture(kModel), int8_options());
  const Model kept = Model::from_impl(impl);
  const std::vector<int32_t> ids = {3, 17, 99, 4, 250};
  State a = q.new_state(), b = kept.new_state();
  const std::vector<float> la = q.forward(ids, a), lb = kept.forward(ids, b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  // Other tokens give other logits (the comparison above can fail).
  const std::vector<int32_t> other = {3, 17, 99, 4, 251};
  State st = q.new_state();
  const std::vector<float> lc = q.forward(other, st);
  EXPECT_NE(std::memcmp(la.data(), lc.data(), la.size() * sizeof(float)), 0);
}

TEST(Int8Model, InfoCountsTheInt8BytesAndChangesTheFingerprint) {
  const Model dense = Model::load(test::fixture(kModel));
  const Model q = Model::load(test::fixture(kModel), int8_options());
  const Model q2 = Model::load(test::fixture(kModel), int8_options());
  const ModelInfo &d = dense.info(), &i = q.info();
  const Geometry& g = q.geometry();
  const uint64_t C = g.n_embd, F = g.ffn_dim, V = g.vocab, L = g.n_layer;
  // r/k/v/o [C, C], ffn.key [F, C], ffn.value [C, F] per block, head [V, C]; rows padded to 64,
  // one fp32 scale per row, plus the weight outlier columns the quantiser chose (fp32 weights and
  // int32 indices).
  const auto padded = [](uint64_t c) { return (c + 63) / 64 * 64; };
  const uint64_t params = L * (4 * C * C + 2 * F * C) + V * C;
  uint64_t outlier_bytes = 0, outlier_cols = 0;
  {
    auto mapped = io::MappedFile::open(test::fixture(kModel));
    auto impl = model::build_model(io::read_safetensors(mapped), "", "");
    model::quantize_model_int8(*impl, test::test_pool());
    for (const model::Int8Target& t : model::int8_targets(impl->weights)) {
      const auto& w = dynamic_cast<const model::Int8Linear&>(**t.slot).weights();
      outlier_cols += w.outlier_cols.size();
      outlier_bytes += 4 * w.outlier_cols.size() + 4 * w.outlier_weights.size();
      EXPECT_EQ(w.outlier_weights.size(), w.outlier_cols.size() * w.rows);
    }
  }
  std::cout << "[int8] tiny-rwkv7: " << outlier_cols << " weight outlier columns, "
            << outlier_bytes << " bytes\n";
  const uint64_t int8_bytes =
      L * (4 * C * padded(C) + F * padded(C) + C * padded(F) + 4 * (4 * C + F + C)) +
      V * padded(C) + 4 * V + outlier_bytes;
  EXPECT_EQ(i.quantization, WeightQuantization::kInt8);
  EXPECT_EQ(d.quantization, WeightQuantization::kNone);
  ASSERT_EQ(i.packed_parameters.size(), 1u);
  EXPECT_EQ(i.packed_parameters[0].first, std::string(kInt8LayoutName));
  EXPECT_EQ(i.packed_parameters[0].second, params);
  EXPECT_EQ(i.parameters, d.parameters);
  ASSERT_EQ(i.dtype_parameters.size(), 1u);  // the fixture is all fp32
  EXPECT_EQ(i.dtype_parameters[0].first, DType::F32);
  EXPECT_EQ(i.dtype_parameters[0].second, d.parameters - params);
  EXPECT_EQ(i.weight_bytes, d.weight_bytes - 4 * params + int8_bytes);
  EXPECT_EQ(i.bytes_per_token, d.bytes_per_token - 4 * params + int8_bytes);
  EXPECT_LT(i.weight_bytes, d.weight_bytes / 2);
  EXPECT_NE(i.fingerprint, d.fingerprint);
  EXPECT_EQ(i.fingerprint, q2.info().fingerprint);
  EXPECT_EQ(i.fingerprint.rfind("sha256:", 0), 0u);
  EXPECT_EQ(i.fingerprint.size(), 7u + 64u);
  // kNone is the plain load.
  EXPECT_EQ(Model::load(test::fixture(kModel), LoadOptions{}).info().fingerprint, d.fingerprint);
  // The embedded default model takes the same options.
  EXPECT_EQ(Model::load_default(int8_options()).info().quantization, WeightQuantization::kInt8);
}

class Int8Passes : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = test::load_fixture_tensors("tiny-rwkv7/seq64.safetensors");
    tokens_ = test::ints(data_, "tokens");
  }
  io::TensorSet data_;
  std::vector<int32_t> tokens_;
};

TEST_F(Int8Passes, ForwardRowsAreBitIdenticalToStep) {
  const Model m = Model::load(test::fixture(kModel), int8_options());
  const int64_t V = m.geometry().vocab;
  State par = m.new_state(), rec = m.new_state();
  const std::vector<float> all = m.forward(tokens_, par, true);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::vector<float> step = m.step(tokens_[t], rec);
    ASSERT_EQ(std::memcmp(step.data(), all.data() + t * V, V * sizeof(float)), 0) << "t=" << t;
  }
  ASSERT_EQ(par.size(), rec.size());
  EXPECT_EQ(std::memcmp(par.data(), rec.data(), par.bytes()), 0);
  // Batched passes: two sequences packed in one GEMM, and a batched step.
  const std::span<const int32_t> a(tokens_.data(), 20), b(tokens_.data() + 20, 33);
  State sa = m.new_state(), sb = m.new_state(), ra = m.new_state(), rb = m.new_state();
  const std::vector<std::span<const int32_t>> seqs = {a, b};
  const std::vector<State*> states = {&sa, &sb};
  const std::vector<float> batch = m.forward_batch(seqs, states);
  const std::vector<float> la = m.forward(a, ra), lb = m.forward(b, rb);
  EXPECT_EQ(std::memcmp(batch.data(), la.data(), V * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(batch.data() + V, lb.data(), V * sizeof(float)), 0);
  const std::vector<int32_t> next = {tokens_[40], tokens_[41]};
  const std::vector<float> stepped = m.step_batch(next, states);
  const std::vector<float> oa = m.step(next[0], ra), ob = m.step(next[1], rb);
  EXPECT_EQ(std::memcmp(stepped.data(), oa.data(), V * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(stepped.data() + V, ob.data(), V * sizeof(float)), 0);
}

// Mean over positions of KL(P || Q) = sum p (log p - log q), log-softmax in double.
double mean_kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits, int64_t V,
               double* top1_agreement) {
  const int64_t T = static_cast<int64_t>(p_logits.size()) / V;
  double total = 0;
  int64_t agree = 0;
  for (int64_t t = 0; t < T; ++t) {
    auto log_softmax = [&](const float* l, std::vector<double>& out) {
      double mx = -1e300;
      for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double{l[i]});
      double s = 0;
      for (int64_t i = 0; i < V; ++i) s += std::exp(double{l[i]} - mx);
      out.resize(V);
      for (int64_t i = 0; i < V; ++i) out[i] = double{l[i]} - mx - std::log(s);
    };
    std::vector<double> lp, lq;
    log_softmax(p_logits.data() + t * V, lp);
    log_softmax(q_logits.data() + t * V, lq);
    double kl = 0;
    int64_t ap = 0, aq = 0;
    for (int64_t i = 0; i < V; ++i) {
      kl += std::exp(lp[i]) * (lp[i] - lq[i]);
      if (lp[i] > lp[ap]) ap = i;
      if (lq[i] > lq[aq]) aq = i;
    }
    total += kl;
    agree += ap == aq;
  }
  *top1_agreement = static_cast<double>(agree) / static_cast<double>(T);
  return total / static_cast<double>(T);
}

TEST(Int8Model, KlToTheDenseModelOnTheFixtureSequencesIsSmall) {
  const Model dense = Model::load(test::fixture(kModel));
  const Model q = Model::load(test::fixture(kModel), int8_options());
  const int64_t V = dense.geometry().vocab;
  for (const char* file : {"seq64", "bytes256", "prompt3"}) {
    const io::TensorSet data =
        test::load_fixture_tensors(std::string("tiny-rwkv7/") + file + ".safetensors");
    const std::vector<int32_t> tokens = test::ints(data, "tokens");
    State sd = dense.new_state(), sq = q.new_state();
    const std::vector<float> ld = dense.forward(tokens, sd, true), lq = q.forward(tokens, sq, true);
    double top1 = 0;
    const double kl = mean_kl(ld, lq, V, &top1);
    std::cout << "[int8] int8 KL(dense || int8) on tiny-rwkv7 " << file << " (" << tokens.size()
              << " positions): mean " << kl << " nats/token, top-1 agreement " << top1 << "\n";
    EXPECT_LT(kl, 1e-2) << file;
    EXPECT_GT(kl, 0.0) << file << ": the int8 model should not compute the dense logits";
  }
}

// RWKV-X (../shared/fixtures/rwkvx): the attention blocks' projections and channel mix are
// covered too; the parallel pass still equals the recurrent step bit for bit (full attention), and
// the KL to the dense model over the fixture sequence is reported.
TEST(Int8Model, RwkvxAttentionBlocksAreCoveredAndPassesAgree) {
  const std::string path = test::fixture("rwkvx/rwkvx-tiny.safetensors");
  const Model dense = Model::load(path);
  const Model q = Model::load(path, int8_options());
  const Geometry& g = q.geometry();
  ASSERT_GT(g.n_attn, 0);
  const uint64_t C = g.n_embd, F = g.ffn_dim, Fa = g.attn_ffn_dim;
  const uint64_t params = g.n_layer * (4 * C * C + 2 * F * C) + g.n_attn * (4 * C * C + 2 * Fa * C) +
                          static_cast<uint64_t>(g.vocab) * C;
  ASSERT_EQ(q.info().packed_parameters.size(), 1u);
  EXPECT_EQ(q.info().packed_parameters[0].second, params);
  const io::TensorSet f = test::load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = test::ints(f, "tokens");
  const int64_t V = g.vocab;
  State par = q.new_state(), rec = q.new_state();
  const std::vector<float> all = q.forward(tokens, par, true);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float> step = q.step(tokens[t], rec);
    ASSERT_EQ(std::memcmp(step.data(), all.data() + t * V, V * sizeof(float)), 0) << "t=" << t;
  }
  State sd = dense.new_state();
  const std::vector<float> ld = dense.forward(tokens, sd, true);
  double top1 = 0;
  const double kl = mean_kl(ld, all, V, &top1);
  std::cout << "[int8] int8 KL(dense || int8) on rwkvx-tiny full-seq96 (" << tokens.size()
            << " positions, full attention): mean " << kl << " nats/token, top-1 agreement " << top1
            << "\n";
  EXPECT_LT(kl, 1e-2);
  EXPECT_GT(kl, 0.0);
}

// Writes a copy of the safetensors checkpoint `in` to `out` with channels 30 and 200 of the last
// axis multiplied by 50 in every tensor whose name contains one of `parts` (all F32).
void write_scaled_channels(const std::string& in, const std::string& out,
                           const std::vector<std::string>& parts, size_t expect_tensors) {
  auto mapped = io::MappedFile::open(in);
  const io::TensorSet src = io::read_safetensors(mapped);
  std::vector<io::TensorToWrite> tensors;
  std::vector<std::string> patched;
  patched.reserve(src.tensors().size());
  for (const io::TensorView& t : src.tensors()) {
    std::string_view bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    bool target = false;
    for (const std::string& p : parts) target = target || t.name.find(p) != std::string::npos;
    if (target) {
      ASSERT_EQ(t.dtype, DType::F32);
      patched.emplace_back(bytes);
      float* v = reinterpret_cast<float*>(patched.back().data());
      const int64_t cols = t.shape.back(), rows = static_cast<int64_t>(t.nbytes / 4) / cols;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c : {30, 200}) v[r * cols + c] *= 50.0f;
      bytes = patched.back();
    }
    tensors.push_back({t.name, t.dtype, t.shape, bytes});
  }
  ASSERT_EQ(patched.size(), expect_tensors);
  io::write_safetensors(out, tensors, src.metadata());
}

// Issue 25, item 9: outlier channels, as trained checkpoints have them, on a synthetic model -
// weight columns x50 in every r/k/v/FFN-key matrix, and activation channels x50 (the ln1/ln2
// weight and bias, so the normalised inputs of those matrices carry them). On these files, with
// `wick kl` on the README's text, one scale per row (the rule before) gave KL 0.070 and 0.066
// against 0.00067 without outliers; the weight outlier columns and the per-call input outlier
// columns give 0.0035 and 0.0107 (the rest of the activation case is the weights' rounding error
// times the 50x values, and the heavier tails downstream). Here, on random tokens: 0.00072
// without, 0.0059 and 0.0077.
TEST(Int8Model, OutlierChannelsDoNotRaiseTheKl) {
  const std::filesystem::path dir = test::scratch_dir();
  const std::string clean = (dir / "synth-4-256.safetensors").string();
  const std::string wcols = (dir / "synth-4-256-weight-outliers.safetensors").string();
  const std::string acts = (dir / "synth-4-256-activation-outliers.safetensors").string();
  write_synthetic_checkpoint(clean, make_synth_geometry(4, 256, 256), DType::F32, 3);
  write_scaled_channels(clean, wcols,
                        {".att.receptance.weight", ".att.key.weight", ".att.value.weight",
                         ".ffn.key.weight"},
                        16);
  write_scaled_channels(clean, acts, {".ln1.", ".ln2."}, 16);
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(160);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
  double kl[3], top1[3];
  const char* what[3] = {"", "with two weight columns x50 ", "with two activation channels x50 "};
  int i = 0;
  for (const std::string& path : {clean, wcols, acts}) {
    const Model dense = Model::load(path);
    const Model q = Model::load(path, int8_options());
    State sd = dense.new_state(), sq = q.new_state();
    kl[i] = mean_kl(dense.forward(tokens, sd, true), q.forward(tokens, sq, true),
                    dense.geometry().vocab, &top1[i]);
    std::cout << "[int8] int8 KL(dense || int8) on synthetic 4:256:256 " << what[i] << "("
              << tokens.size() << " positions): mean " << kl[i] << " nats/token, top-1 agreement "
              << top1[i] << "\n";
    ++i;
  }
  EXPECT_GT(kl[0], 0.0);
  EXPECT_LT(kl[1], 10.0 * kl[0]);  // one scale per row: ~100x
  EXPECT_LT(kl[1], 0.01);
  EXPECT_LT(kl[2], 15.0 * kl[0]);
  EXPECT_LT(kl[2], 0.015);
  for (int j : {1, 2}) EXPECT_GT(top1[j], 0.9) << what[j];
}

TEST(Int8Model, StatesOfTheDenseModelNeedAllowOtherBase) {
  const Model dense = Model::load(test::fixture(kModel));
  const Model q = Model::load(test::fixture(kModel), int8_options());
  State s = dense.new_state();
  dense.forward(std::vector<int32_t>{34, 105, 110}, s);
  const std::string path = (test::scratch_dir() / "dense.state").string();
  save_state(path, s, dense);
  EXPECT_THROW(load_state(path, q), StateFileError);
  const LoadedState loaded = load_state(path, q, /*allow_other_base=*/true);
  EXPECT_FALSE(loaded.warnings.empty());
  // A state saved by the int8 model round-trips through it.
  const std::string p2 = (test::scratch_dir() / "int8.state").string();
  State s2 = q.new_state();
  q.forward(std::vector<int32_t>{34, 105, 110}, s2);
  save_state(p2, s2, q);
  EXPECT_NO_THROW(load_state(p2, q));
}

TEST(Int8Model, RefusesAnRwkvqFile) {
  const std::string path = test::fixture("rwkvq/tiny_reduction.rwkvq");
  EXPECT_NO_THROW(Model::load(path));
  try {
    Model::load(path, int8_options());
    ADD_FAILURE() << "loaded a .rwkvq file with --quantize int8";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, ".rwkvq")) << msg;
    EXPECT_TRUE(contains(msg, "without --quantize int8")) << msg;
  }
}

TEST(Int8Model, RefusesANonFiniteWeightNamingTheTensorAndRow) {
  const io::TensorSet src = test::load_fixture_tensors(kModel);
  std::vector<io::TensorToWrite> tensors;
  std::string patched;
  for (const io::TensorView& t : src.tensors()) {
    std::string_view bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (t.name == "blocks.3.att.key.weight") {
      patched.assign(bytes);
      const float inf = std::numeric_limits<float>::infinity();
      std::memcpy(patched.data() + (5 * 64 + 7) * 4, &inf, 4);  // row 5
      bytes = patched;
    }
    tensors.push_back({t.name, t.dtype, t.shape, bytes});
  }
  const std::string path = (test::scratch_dir() / "inf.safetensors").string();
  io::write_safetensors(path, tensors, src.metadata());
  EXPECT_NO_THROW(Model::load(path));  // dense: loads (and computes inf/NaN as the file says)
  try {
    Model::load(path, int8_options());
    ADD_FAILURE() << "quantised a matrix holding inf";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "blocks.3.att.key.weight")) << msg;
    EXPECT_TRUE(contains(msg, "row 5")) << msg;
    EXPECT_TRUE(contains(msg, "non-finite")) << msg;
  }
}

}  // namespace
}  // namespace wick
