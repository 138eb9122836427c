// LoRA adapters (wick/lora.h, issue 23): loading RWKV-PEFT and rwkv-metal files, the run-time term
// in the one projection path (dense, int8 and .rwkvq weights), norm replacement, merging, the
// alpha rule, per-sequence adapters in batched passes, the model identity, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/lora.h"
#include "wick/model.h"
#include "wick/quantize.h"
#include "wick/state_file.h"
#include "wick/synth.h"

namespace wick {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGeometry = "2:128:256";  // L 2, C 128, F 512, V 256
constexpr int kC = 128, kF = 512, kL = 2;
const std::vector<int32_t> kTokens = {1, 5, 9, 200, 17, 3, 77, 42};

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

// A tensor to write into an adapter file.
struct T {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> v;
};

void write_tensors(const fs::path& path, const std::vector<T>& ts,
                   const std::map<std::string, std::string>& meta = {}) {
  std::vector<io::TensorToWrite> out;
  for (const T& t : ts)
    out.push_back({t.name, DType::F32, t.shape,
                   std::string_view(reinterpret_cast<const char*>(t.v.data()), t.v.size() * 4)});
  io::write_safetensors(path.string(), out, meta);
}

std::vector<float> randn(size_t n, uint64_t seed, float sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The six adapted matrices of a layer: RWKV-PEFT name, rwkv-metal name, out, in.
struct Target {
  const char* peft;
  const char* metal;
  int out, in;
};
const Target kTargets[] = {
    {"att.receptance", "tmix.r_proj", kC, kC}, {"att.key", "tmix.k_proj", kC, kC},
    {"att.value", "tmix.v_proj", kC, kC},      {"att.output", "tmix.o_proj", kC, kC},
    {"ffn.key", "cmix.key", kF, kC},           {"ffn.value", "cmix.value", kC, kF},
};

// Factors for every target of every layer: A ~ N(0, 0.05), B ~ N(0, b_sd) (b_sd = 0: B = 0),
// B multiplied by b_mul. Names in the RWKV-PEFT or rwkv-metal convention.
std::vector<T> factors(int rank, uint64_t seed, float b_sd = 0.05f, bool metal = false,
                       float b_mul = 1.f) {
  std::vector<T> ts;
  uint64_t s = seed;
  for (int l = 0; l < kL; ++l)
    for (const Target& t : kTargets) {
      const std::string base = "blocks." + std::to_string(l) + "." + (metal ? t.metal : t.peft);
      ts.push_back({base + (metal ? ".lora_a" : ".lora_A"),
                    {rank, t.in},
                    randn(static_cast<size_t>(rank) * t.in, ++s, 0.05f)});
      std::vector<float> b = b_sd > 0 ? randn(static_cast<size_t>(t.out) * rank, ++s, b_sd)
                                      : std::vector<float>(static_cast<size_t>(t.out) * rank, 0.f);
      for (float& x : b) x *= b_mul;
      ts.push_back({base + (metal ? ".lora_b" : ".lora_B"), {t.out, rank}, std::move(b)});
    }
  return ts;
}

class Lora : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir();
    base_path_ = (dir_ / "base.safetensors").string();
    write_synthetic_checkpoint(base_path_, parse_synth_geometry(kGeometry), DType::F32, 7);
    base_ = Model::load(base_path_);
  }
  std::string adapter(const std::string& name, const std::vector<T>& ts,
                      const std::map<std::string, std::string>& meta = {}) {
    const fs::path p = dir_ / name;
    write_tensors(p, ts, meta);
    return p.string();
  }
  std::shared_ptr<const LoraAdapter> load(const std::string& path, std::optional<double> alpha,
                                          double scale = 1.0) {
    return LoraAdapter::load(path, base_, LoraOptions{alpha, scale});
  }
  std::vector<float> logits(const Model& m, const std::vector<int32_t>& tokens = kTokens) {
    State s = m.new_state();
    return m.forward(tokens, s, /*all_positions=*/true);
  }
  // Messages of a throw of type E from f.
  template <class E, class F>
  std::string error_of(F&& f) {
    try {
      f();
    } catch (const E& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an exception";
    return "";
  }
  fs::path dir_;
  std::string base_path_;
  Model base_ = Model::load_default();
};

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return m / scale;
}

TEST_F(Lora, ZeroBLeavesLogitsBitIdenticalAndARandomBChangesThem) {
  const auto zero = load(adapter("zero.safetensors", factors(8, 1, 0.f)), 16.0);
  const auto rnd = load(adapter("rnd.safetensors", factors(8, 1)), 16.0);
  EXPECT_EQ(zero->rank(), 8);
  EXPECT_EQ(zero->adapted().size(), 12u);
  EXPECT_EQ(zero->adapted()[0], "blocks.0.att.receptance.weight");
  EXPECT_DOUBLE_EQ(zero->scale(), 2.0);
  const std::vector<float> plain = logits(base_);
  EXPECT_EQ(logits(base_.with_adapter(zero)), plain);
  const std::vector<float> changed = logits(base_.with_adapter(rnd));
  EXPECT_GT(max_rel(changed, plain), 1e-3);
  // with_adapter(nullptr) is the base again.
  EXPECT_EQ(logits(base_.with_adapter(rnd).with_adapter(nullptr)), plain);
}

TEST_F(Lora, RunTimeEqualsMergedCheckpoint) {
  std::vector<T> ts = factors(8, 3);
  ts.push_back({"blocks.1.ln2.weight", {kC}, randn(kC, 99, 0.2f)});
  for (float& x : ts.back().v) x += 1.f;
  ts.push_back({"ln_out.bias", {kC}, randn(kC, 98, 0.1f)});
  const auto ad = load(adapter("a.safetensors", ts), 32.0);
  EXPECT_EQ(ad->replaced(), (std::vector<std::string>{"ln_out.bias", "blocks.1.ln2.weight"}));
  const std::string merged = (dir_ / "merged.safetensors").string();
  const LoraMergeSummary s = merge_lora(base_path_, *ad, merged);
  EXPECT_EQ(s.merged, 12u);
  EXPECT_EQ(s.replaced, 2u);
  const Model m = Model::load(merged);
  const std::vector<float> run_time = logits(base_.with_adapter(ad));
  const std::vector<float> from_merged = logits(m);
  EXPECT_LE(max_rel(run_time, from_merged), 1e-5);
  EXPECT_GT(max_rel(from_merged, logits(base_)), 1e-3);
  // Merge metadata, and tensors the adapter does not touch are copied byte for byte.
  const io::TensorSet in = io::read_safetensors(io::MappedFile::open(base_path_));
  const io::TensorSet out = io::read_safetensors(io::MappedFile::open(merged));
  EXPECT_TRUE(contains(out.metadata().at("wick.lora_merged"), "rank 8"));
  for (const char* name : {"emb.weight", "blocks.0.att.w1", "head.weight", "blocks.1.ln2.bias"}) {
    const io::TensorView* a = in.find(name);
    const io::TensorView* b = out.find(name);
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(a->data), a->nbytes),
              std::string_view(reinterpret_cast<const char*>(b->data), b->nbytes))
        << name;
  }
  EXPECT_NE(test::floats(out, "blocks.0.att.key.weight"),
            test::floats(in, "blocks.0.att.key.weight"));
}

TEST_F(Lora, MergeKeepsTheBaseDtypeAndRefusesPackedBases) {
  const std::string bf16 = (dir_ / "bf16.safetensors").string();
  write_synthetic_checkpoint(bf16, parse_synth_geometry(kGeometry), DType::BF16, 7);
  const auto ad = load(adapter("a.safetensors", factors(4, 3)), 8.0);
  const std::string merged = (dir_ / "merged16.safetensors").string();
  merge_lora(bf16, *ad, merged);
  const io::TensorSet out = io::read_safetensors(io::MappedFile::open(merged));
  EXPECT_EQ(out.find("blocks.0.att.key.weight")->dtype, DType::BF16);
  const std::string packed = (dir_ / "base.rwkvq").string();
  quantize_plain(base_path_, packed, "sb6:4");
  const std::string msg = error_of<CheckpointError>(
      [&] { merge_lora(packed, *ad, (dir_ / "never.safetensors").string()); });
  EXPECT_TRUE(contains(msg, ".rwkvq")) << msg;
  EXPECT_TRUE(contains(msg, "dense")) << msg;
  EXPECT_FALSE(fs::exists(dir_ / "never.safetensors"));
}

TEST_F(Lora, AlphaOverRankScaling) {
  // alpha 2a with B / 2 equals alpha a with B, bit for bit (halving and doubling are exact).
  const auto a = load(adapter("a.safetensors", factors(8, 5)), 16.0);
  const auto half_b = load(adapter("h.safetensors", factors(8, 5, 0.05f, false, 0.5f)), 32.0);
  EXPECT_DOUBLE_EQ(half_b->scale(), 2 * a->scale());
  const std::vector<float> la = logits(base_.with_adapter(a));
  EXPECT_EQ(logits(base_.with_adapter(half_b)), la);
  // And a different alpha gives different logits; lora_scale multiplies alpha / r.
  const auto other = load(adapter("a.safetensors", factors(8, 5)), 24.0);
  EXPECT_NE(logits(base_.with_adapter(other)), la);
  const auto scaled = load(adapter("a.safetensors", factors(8, 5)), 8.0, 2.0);
  EXPECT_DOUBLE_EQ(scaled->scale(), a->scale());
  EXPECT_EQ(logits(base_.with_adapter(scaled)), la);
}

TEST_F(Lora, NormInTheFileReplacesTheBaseOne) {
  std::vector<float> ln = randn(kC, 11, 0.3f);
  for (float& x : ln) x += 1.f;
  // Only a norm: no factors, so no alpha needed.
  const auto ad = load(adapter("ln.safetensors", {{"blocks.0.ln1.weight", {kC}, ln}}), {});
  EXPECT_EQ(ad->replaced(), std::vector<std::string>{"blocks.0.ln1.weight"});
  // The same checkpoint with that tensor replaced, written by hand.
  const io::TensorSet in = io::read_safetensors(io::MappedFile::open(base_path_));
  std::vector<io::TensorToWrite> out;
  for (const io::TensorView& t : in.tensors()) {
    std::string_view bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (t.name == "blocks.0.ln1.weight")
      bytes = std::string_view(reinterpret_cast<const char*>(ln.data()), ln.size() * 4);
    out.push_back({t.name, t.dtype, t.shape, bytes});
  }
  const std::string edited = (dir_ / "edited.safetensors").string();
  io::write_safetensors(edited, out);
  const std::vector<float> want = logits(Model::load(edited));
  EXPECT_EQ(logits(base_.with_adapter(ad)), want);
  EXPECT_NE(logits(base_), want);
  // rwkv-metal / fla norm names map to the same tensors (tmix.ln_x is att.ln_x).
  const auto gn = load(adapter("gn.safetensors", {{"blocks.1.tmix.ln_x.bias", {kC}, ln}}), {});
  EXPECT_EQ(gn->replaced(), std::vector<std::string>{"blocks.1.att.ln_x.bias"});
  EXPECT_NE(logits(base_.with_adapter(gn)), logits(base_));
}

TEST_F(Lora, ParallelPassEqualsRecurrentStepBitForBit) {
  std::vector<T> ts = factors(16, 8);
  ts.push_back({"blocks.0.ln0.weight", {kC}, randn(kC, 1, 0.1f)});
  ts.push_back({"blocks.1.att.ln_x.weight", {kC}, randn(kC, 2, 0.1f)});
  const Model m = base_.with_adapter(load(adapter("a.safetensors", ts), 16.0));
  State s1 = m.new_state(), s2 = m.new_state();
  const std::vector<float> par = m.forward(kTokens, s1, true);
  const int V = m.geometry().vocab;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    const std::vector<float> row = m.step(kTokens[t], s2);
    EXPECT_EQ(row, std::vector<float>(par.begin() + t * V, par.begin() + (t + 1) * V)) << t;
  }
  EXPECT_EQ(s1.wkv(1)[5], s2.wkv(1)[5]);
}

TEST_F(Lora, BatchRowsWithDifferentAdaptersEqualTheirSoloRuns) {
  const auto a1 = load(adapter("a1.safetensors", factors(8, 21)), 16.0);
  std::vector<T> t2 = factors(4, 22, 0.05f, /*metal=*/true);
  t2.push_back({"ln_out.weight", {kC}, randn(kC, 3, 0.2f)});
  const auto a2 = load(adapter("a2.safetensors", t2), 4.0);
  const std::vector<std::vector<int32_t>> seqs = {{4, 8, 15}, {16, 23}, {42, 7, 7, 1}, {99}};
  const std::vector<const LoraAdapter*> ads = {a1.get(), nullptr, a2.get(), a1.get()};
  const std::vector<std::shared_ptr<const LoraAdapter>> owned = {a1, nullptr, a2, a1};
  std::vector<std::span<const int32_t>> spans(seqs.begin(), seqs.end());
  std::vector<State> states;
  for (size_t b = 0; b < seqs.size(); ++b) states.push_back(base_.new_state());
  std::vector<State*> ptrs;
  for (State& s : states) ptrs.push_back(&s);
  const int V = base_.geometry().vocab;
  std::vector<float> all(10 * static_cast<size_t>(V));
  base_.forward_batch(spans, ptrs, ads, all, /*all_positions=*/true);
  const std::vector<State> after_seqs = states;
  size_t row = 0;
  std::vector<std::vector<float>> solo_last;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const Model solo = base_.with_adapter(owned[b]);
    State s = solo.new_state();
    const std::vector<float> want = solo.forward(seqs[b], s, true);
    EXPECT_EQ(std::vector<float>(all.begin() + row * V, all.begin() + row * V + want.size()), want)
        << "sequence " << b;
    row += seqs[b].size();
    // The states advanced exactly as the solo run's.
    EXPECT_EQ(std::vector<float>(states[b].wkv(1), states[b].wkv(1) + 64),
              std::vector<float>(s.wkv(1), s.wkv(1) + 64));
    solo_last.emplace_back(want.end() - V, want.end());
  }
  // Rows of one adapter differ from rows of another for the same tokens.
  EXPECT_NE(logits(base_.with_adapter(a1), {99}), logits(base_.with_adapter(a2), {99}));
  // Decode: step_batch with per-row adapters equals each solo step.
  const std::vector<int32_t> next = {3, 3, 3, 3};
  std::vector<float> step(4 * static_cast<size_t>(V));
  std::vector<State> copies = states;
  base_.step_batch(next, ptrs, ads, step);
  for (size_t b = 0; b < 4; ++b) {
    const std::vector<float> want = base_.with_adapter(owned[b]).step(3, copies[b]);
    EXPECT_EQ(std::vector<float>(step.begin() + b * V, step.begin() + (b + 1) * V), want) << b;
  }
  // A Model's own adapter applies to every sequence of its batched passes.
  const Model m1 = base_.with_adapter(a1);
  std::vector<State> st2 = {m1.new_state(), m1.new_state()};
  std::vector<State*> p2 = {&st2[0], &st2[1]};
  const std::vector<std::span<const int32_t>> two = {spans[0], spans[3]};
  const std::vector<float> b2 = m1.forward_batch(two, p2);
  EXPECT_EQ(std::vector<float>(b2.begin(), b2.begin() + V), solo_last[0]);
  EXPECT_EQ(std::vector<float>(b2.begin() + V, b2.end()), solo_last[3]);
  // absorb_batch with per-sequence adapters leaves the states of the logits pass.
  std::vector<State> absorbed;
  for (size_t b = 0; b < seqs.size(); ++b) absorbed.push_back(base_.new_state());
  std::vector<State*> aptrs;
  for (State& s : absorbed) aptrs.push_back(&s);
  base_.absorb_batch(spans, aptrs, ads);
  for (size_t b = 0; b < seqs.size(); ++b)
    EXPECT_EQ(std::vector<float>(absorbed[b].wkv(0), absorbed[b].wkv(0) + 64),
              std::vector<float>(after_seqs[b].wkv(0), after_seqs[b].wkv(0) + 64))
        << b;
  // The adapter count must match.
  const std::vector<const LoraAdapter*> one = {a1.get()};
  EXPECT_THROW(base_.forward_batch(spans, ptrs, one, all, true), InputError);
}

// At one projection (blocks.1.att.output: its input is unchanged by an adapter acting there
// only), the output with the adapter is the base model's own product - dense, int8 or .rwkvq - plus
// scale·B·A·x computed in double precision.
TEST_F(Lora, TermOnDenseInt8AndPackedWeightsMatchesADoubleReference) {
  const int r = 4;
  const std::vector<float> A = randn(static_cast<size_t>(r) * kC, 31, 0.05f);
  const std::vector<float> B = randn(static_cast<size_t>(kC) * r, 32, 0.05f);
  const std::string path = adapter("o.safetensors", {{"blocks.1.att.output.lora_A", {r, kC}, A},
                                                     {"blocks.1.att.output.lora_B", {kC, r}, B}});
  const double alpha = 6.0, scale = alpha / r;
  const std::string packed = (dir_ / "base.rwkvq").string();
  quantize_plain(base_path_, packed, "sb6:4");
  LoadOptions int8;
  int8.quantize = WeightQuantization::kInt8;
  const std::vector<std::pair<std::string, Model>> bases = {
      {"dense", base_}, {"int8", Model::load(base_path_, int8)}, {"sb6:4", Model::load(packed)}};
  for (const auto& [label, m] : bases) {
    SCOPED_TRACE(label);
    auto capture = [](std::vector<float>& in, std::vector<float>& out) {
      return ActivationTrace([&in, &out](std::string_view name, int layer, const float* d,
                                         int64_t rows, int64_t cols) {
        if (layer != 1) return;
        if (name == "in.att.output") in.assign(d, d + rows * cols);
        if (name == "att_out") out.assign(d, d + rows * cols);
      });
    };
    std::vector<float> x0, y0, x1, y1;
    const ActivationTrace t0 = capture(x0, y0), t1 = capture(x1, y1);
    State s0 = m.new_state(), s1 = m.new_state();
    m.forward(kTokens, s0, false, &t0);
    const Model ad = m.with_adapter(LoraAdapter::load(path, m, LoraOptions{alpha, 1.0}));
    ad.forward(kTokens, s1, false, &t1);
    ASSERT_EQ(x0.size(), kTokens.size() * kC);
    ASSERT_EQ(x1, x0);  // same input
    double worst = 0, moved = 0;
    for (size_t t = 0; t < kTokens.size(); ++t) {
      const float* xt = x0.data() + t * kC;
      for (int o = 0; o < kC; ++o) {
        double delta = 0;
        for (int k = 0; k < r; ++k) {
          double ax = 0;
          for (int i = 0; i < kC; ++i) ax += static_cast<double>(A[k * kC + i]) * xt[i];
          delta += static_cast<double>(B[o * r + k]) * ax;
        }
        const double want = y0[t * kC + o] + scale * delta;
        const double got = y1[t * kC + o];
        // fp32 sums: relative to the magnitudes added, not to a result that may cancel.
        const double size = std::fabs(y0[t * kC + o]) + std::fabs(scale * delta) + 1e-6;
        worst = std::max(worst, std::fabs(got - want) / size);
        moved = std::max(moved, std::fabs(scale * delta));
      }
    }
    EXPECT_LT(worst, 1e-5);
    EXPECT_GT(moved, 1e-3);  // the term is not negligible
  }
}

TEST_F(Lora, PeftPthAndMetalSafetensorsNamesLoadAlike) {
  const std::string peft = adapter("peft.safetensors", factors(8, 41));
  const std::string metal = adapter("metal.safetensors", factors(8, 41, 0.05f, true));
  const std::string pth = (dir_ / "peft.pth").string();
  const std::string cmd = "/usr/bin/python3 " +
                          test::shell_quote(std::string(WICK_SOURCE_DIR) +
                                            "/tests/fuzz/tools/safetensors_to_pth.py") +
                          " " + test::shell_quote(peft) + " " + test::shell_quote(pth);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto a = load(peft, 16.0), b = load(metal, 16.0), c = load(pth, 16.0);
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_EQ(a->fingerprint(), c->fingerprint());
  const std::vector<float> la = logits(base_.with_adapter(a));
  EXPECT_EQ(logits(base_.with_adapter(b)), la);
  EXPECT_EQ(logits(base_.with_adapter(c)), la);
  EXPECT_NE(la, logits(base_));
}

TEST_F(Lora, AlphaRule) {
  const std::string plain = adapter("p.safetensors", factors(8, 51));
  std::string msg = error_of<InputError>([&] { load(plain, {}); });
  EXPECT_TRUE(contains(msg, "alpha")) << msg;
  EXPECT_TRUE(contains(msg, "--lora-alpha")) << msg;
  // wick's metadata: no caller alpha needed, same logits; a contradicting alpha is refused.
  const std::string tagged = adapter("w.safetensors", factors(8, 51),
                                     {{"wick.lora", "1"}, {"lora_alpha", "16"}, {"lora_rank", "8"}});
  const auto from_file = load(tagged, {});
  EXPECT_DOUBLE_EQ(from_file->alpha(), 16.0);
  EXPECT_EQ(logits(base_.with_adapter(from_file)), logits(base_.with_adapter(load(plain, 16.0))));
  EXPECT_EQ(load(tagged, 16.0)->scale(), 2.0);
  msg = error_of<InputError>([&] { load(tagged, 8.0); });
  EXPECT_TRUE(contains(msg, "contradicts")) << msg;
  EXPECT_TRUE(contains(msg, "16")) << msg;
  const std::string bad_rank = adapter("br.safetensors", factors(8, 51),
                                       {{"wick.lora", "1"}, {"lora_alpha", "16"}, {"lora_rank", "4"}});
  EXPECT_THROW(load(bad_rank, {}), CheckpointError);
  EXPECT_THROW(load(plain, -1.0), InputError);
  EXPECT_THROW(load(plain, std::numeric_limits<double>::quiet_NaN()), InputError);
}

TEST_F(Lora, RefusalsNameTheProblem) {
  struct Case {
    std::string file;
    std::vector<T> tensors;
    std::vector<std::string> says;
  };
  std::vector<float> a8(8 * kC, 0.01f), b8(kC * 8, 0.01f), b4(kC * 4, 0.01f);
  std::vector<Case> cases = {
      {"pissa_lora.safetensors", factors(8, 1), {"PiSSA", "init_pissa"}},
      {"x.safetensors",
       {{"blocks.0.att.key.init_lora_A", {8, kC}, a8}, {"blocks.0.att.key.lora_A", {8, kC}, a8}},
       {"PiSSA", "init_lora_A"}},
      {"x.safetensors", {{"blocks.0.att.key.disha", {8, kC}, a8}}, {"DiSHA", "disha"}},
      {"x.safetensors", {{"blocks.0.att.key.bone", {8, kC}, a8}}, {"DiSHA", "bone"}},
      {"x.safetensors",
       {{"blocks.0.att.key.lora_A", {8, kC + 1}, std::vector<float>(8 * (kC + 1))},
        {"blocks.0.att.key.lora_B", {kC, 8}, b8}},
       {"expected shape [r, 128]", "[8, 129]"}},
      {"x.safetensors",
       {{"blocks.0.att.key.lora_A", {8, kC}, a8}, {"blocks.0.att.key.lora_B", {kC, 4}, b4}},
       {"[128, 8]", "[128, 4]", "same rank"}},
      {"x.safetensors",
       {{"blocks.5.att.key.lora_A", {8, kC}, a8}, {"blocks.5.att.key.lora_B", {kC, 8}, b8}},
       {"layer 5", "2 layers"}},
      {"x.safetensors",
       {{"blocks.0.att.w1.lora_A", {8, kC}, a8}, {"blocks.0.att.w1.lora_B", {kC, 8}, b8}},
       {"not a matrix wick adapts", "receptance"}},
      {"x.safetensors", {{"blocks.0.att.key.lora_A", {8, kC}, a8}}, {"factor B", "missing"}},
      {"x.safetensors",
       {{"blocks.0.att.key.lora_A", {8, kC}, a8},
        {"blocks.0.tmix.k_proj.lora_a", {8, kC}, a8},
        {"blocks.0.att.key.lora_B", {kC, 8}, b8}},
       {"both the LoRA factor A"}},
      {"x.safetensors", {{"blocks.0.att.x_r", {1, 1, kC}, std::vector<float>(kC)}},
       {"not a LayerNorm", "blocks.0.att.x_r"}},
      {"x.safetensors", {{"blocks.0.ln1.weight", {kC + 2}, std::vector<float>(kC + 2)}},
       {"expected shape [128]", "[130]"}},
      {"x.safetensors", {{"something.else", {4}, std::vector<float>(4)}},
       {"neither a LoRA factor"}},
  };
  std::vector<float> nan_a = a8;
  nan_a[3] = std::numeric_limits<float>::quiet_NaN();
  cases.push_back({"x.safetensors",
                   {{"blocks.0.att.key.lora_A", {8, kC}, nan_a},
                    {"blocks.0.att.key.lora_B", {kC, 8}, b8}},
                   {"NaN", "element 3"}});
  for (const Case& c : cases) {
    const std::string path = adapter(c.file, c.tensors);
    const std::string msg = error_of<CheckpointError>([&] { load(path, 16.0); });
    for (const std::string& s : c.says) EXPECT_TRUE(contains(msg, s)) << msg;
    EXPECT_TRUE(contains(msg, path)) << msg;
    fs::remove(path);
  }
}

TEST_F(Lora, IdentityChangesWithTheAdapter) {
  const auto ad = load(adapter("a.safetensors", factors(8, 61)), 16.0);
  const Model m = base_.with_adapter(ad);
  EXPECT_NE(m.info().fingerprint, base_.info().fingerprint);
  EXPECT_TRUE(contains(m.info().adapter, "rank 8")) << m.info().adapter;
  EXPECT_TRUE(base_.info().adapter.empty());
  EXPECT_GT(m.info().bytes_per_token, base_.info().bytes_per_token);
  // Another alpha is another identity; the same adapter loaded twice is the same one.
  EXPECT_NE(base_.with_adapter(load(ad->source(), 8.0)).info().fingerprint, m.info().fingerprint);
  EXPECT_EQ(base_.with_adapter(load(ad->source(), 16.0)).info().fingerprint,
            m.info().fingerprint);
  // A state saved with the adapter is refused by the base model (and vice versa).
  State s = m.new_state();
  m.forward(kTokens, s);
  const std::string path = (dir_ / "s.safetensors").string();
  save_state(path, s, m);
  EXPECT_THROW(load_state(path, base_), StateFileError);
  EXPECT_NO_THROW(load_state(path, m));
  // An adapter loaded for another geometry is refused by with_adapter and the batched passes.
  const Model other = test::synthetic_model("1:128:256", DType::F32, 3);
  EXPECT_THROW(other.with_adapter(ad), InputError);
  State so = other.new_state();
  std::vector<std::span<const int32_t>> seqs = {kTokens};
  std::vector<State*> states = {&so};
  std::vector<const LoraAdapter*> ads = {ad.get()};
  std::vector<float> out(256);
  EXPECT_THROW(other.forward_batch(seqs, states, ads, out), InputError);
}

TEST_F(Lora, LoadOptionsApplyTheAdapter) {
  const std::string path = adapter("a.safetensors", factors(8, 71));
  LoadOptions o;
  o.lora = path;
  o.lora_alpha = 16.0;
  const Model m = Model::load(base_path_, o);
  ASSERT_TRUE(m.adapter());
  EXPECT_EQ(logits(m), logits(base_.with_adapter(load(path, 16.0))));
  o.lora_alpha.reset();
  EXPECT_THROW(Model::load(base_path_, o), InputError);
}

}  // namespace
}  // namespace wick
