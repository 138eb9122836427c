// LoRA adapters per request in the serving engine (wick/engine.h Request::adapter, issue 23):
// rows with different adapters share one batched pass and each equals its solo run on
// Model::with_adapter; prefixes cached under one adapter never serve another; an adapter's
// with_scale() computes exactly what loading it with that scale computes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors_writer.h"
#include "engine_test_helpers.h"
#include "test_util.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/lora.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

namespace fs = std::filesystem;

const Model& tiny() {
  static const Model m = Model::load_default();
  return m;
}

// Writes an RWKV-PEFT adapter of rank r for `m` (every adapted matrix of every layer; A and B
// normal with sd 0.2 from `seed`) in `dir` and returns its path.
std::string write_adapter(const Model& m, const fs::path& dir, const std::string& name, int r,
                          uint64_t seed) {
  const Geometry& g = m.geometry();
  const int64_t C = g.n_embd, F = g.ffn_dim;
  struct Target {
    const char* name;
    int64_t out, in;
  };
  const Target targets[] = {{"att.receptance", C, C}, {"att.key", C, C},   {"att.value", C, C},
                            {"att.output", C, C},     {"ffn.key", F, C},   {"ffn.value", C, F}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 0.2f);
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<float>> values;
  for (int64_t l = 0; l < g.n_layer; ++l)
    for (const Target& t : targets) {
      const std::string base = "blocks." + std::to_string(l) + "." + t.name;
      for (bool a : {true, false}) {
        names.push_back(base + (a ? ".lora_A" : ".lora_B"));
        shapes.push_back(a ? std::vector<int64_t>{r, t.in} : std::vector<int64_t>{t.out, r});
        std::vector<float> v(static_cast<size_t>(shapes.back()[0] * shapes.back()[1]));
        for (float& x : v) x = d(rng);
        values.push_back(std::move(v));
      }
    }
  std::vector<io::TensorToWrite> out;
  for (size_t i = 0; i < names.size(); ++i)
    out.push_back({names[i], DType::F32, shapes[i],
                   std::string_view(reinterpret_cast<const char*>(values[i].data()),
                                    values[i].size() * sizeof(float))});
  const fs::path p = dir / name;
  io::write_safetensors(p.string(), out, {});
  return p.string();
}

Solo run_solo(const std::shared_ptr<const LoraAdapter>& adapter, const std::vector<int32_t>& prompt,
              const GenerationConfig& c) {
  ByteTokenizer tok;
  return test::run_solo(tiny().with_adapter(adapter), tok, prompt, c);
}

GenerationConfig config(uint64_t seed, int n, bool sampled) {
  return generation_config(seed, n, sampled, 0.8f);
}

class EngineLora : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir();
    a1_ = LoraAdapter::load(write_adapter(tiny(), dir_, "a1.safetensors", 4, 11), tiny(),
                            {16.0, 1.0});
    a2_ = LoraAdapter::load(write_adapter(tiny(), dir_, "a2.safetensors", 8, 22), tiny(),
                            {8.0, 1.0});
  }
  fs::path dir_;
  std::shared_ptr<const LoraAdapter> a1_, a2_;
};

TEST_F(EngineLora, RowsWithDifferentAdaptersInOneBatchEqualTheirSoloRuns) {
  ByteTokenizer tok;
  const std::vector<int32_t> p = tok.encode("Once upon a time, there was a");
  const std::vector<int32_t> q = tok.encode("The quick brown fox jumps over the lazy dog and then");
  struct Case {
    std::vector<int32_t> prompt;
    std::shared_ptr<const LoraAdapter> adapter;
    GenerationConfig config;
    Solo solo;
  };
  const auto half = a1_->with_scale(0.5);
  std::vector<Case> cases = {
      {p, nullptr, config(1, 40, false), {}}, {p, a1_, config(1, 40, false), {}},
      {p, a2_, config(1, 40, false), {}},     {q, half, config(2, 30, true), {}},
      {q, a1_, config(3, 35, true), {}},      {p, a2_, config(4, 25, true), {}},
  };
  cases[4].config.stop_strings = {" the"};
  for (Case& c : cases) c.solo = run_solo(c.adapter, c.prompt, c.config);
  // The adapters change what is generated (the comparison below could not pass by accident).
  EXPECT_NE(cases[0].solo.result.continuation.logits, cases[1].solo.result.continuation.logits);
  EXPECT_NE(cases[1].solo.result.continuation.logits, cases[2].solo.result.continuation.logits);
  EXPECT_NE(cases[0].solo.result.tokens, cases[1].solo.result.tokens);

  for (int chunk : {3, 1000}) {
    EngineOptions o;
    o.max_rows = 8;
    o.prefill_chunk = chunk;
    o.prefill_chunk_idle = std::max(chunk, 16);
    o.itl_ratio = 0;
    o.cache_bytes = 0;
    Engine engine(tiny(), tok, o);
    std::vector<Request> requests;
    std::vector<std::string> streamed(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      Request r;
      r.prompt_tokens = cases[i].prompt;
      r.config = cases[i].config;
      r.adapter = cases[i].adapter;
      r.on_chunk = [&streamed, i](std::string_view text, int32_t) {
        streamed[i] += text;
        return true;
      };
      requests.push_back(std::move(r));
    }
    const std::vector<RequestHandle> handles = engine.submit_all(std::move(requests));
    for (size_t i = 0; i < cases.size(); ++i) {
      const EngineResult& got = handles[i].wait();
      const std::string what = "case " + std::to_string(i) + ", chunk " + std::to_string(chunk);
      EXPECT_EQ(got.tokens, cases[i].solo.result.tokens) << what;
      EXPECT_EQ(got.text, cases[i].solo.result.text) << what;
      EXPECT_EQ(streamed[i], cases[i].solo.streamed) << what;
      EXPECT_EQ(got.stop_reason, cases[i].solo.result.stop_reason) << what;
      EXPECT_TRUE(got.state == cases[i].solo.state) << what;
      EXPECT_EQ(got.continuation.logits, cases[i].solo.result.continuation.logits) << what;
    }
    // The rows shared passes (the batch really mixed adapters).
    EXPECT_GT(engine.stats().pass_rows, engine.stats().iterations);
  }
}

TEST_F(EngineLora, CachedPrefixesNeverServeAnotherAdapter) {
  ByteTokenizer tok;
  const std::vector<int32_t> p = tok.encode("A prompt that is cached under one adapter only.");
  Engine engine(tiny(), tok, EngineOptions{});
  auto run = [&](std::shared_ptr<const LoraAdapter> a) {
    Request r;
    r.prompt_tokens = p;
    r.config = config(5, 12, false);
    r.adapter = std::move(a);
    return engine.submit(std::move(r)).wait();
  };
  const EngineResult first = run(a1_);
  EXPECT_EQ(first.cached_tokens, 0);
  const EngineResult other = run(a2_);
  EXPECT_EQ(other.cached_tokens, 0) << "a prefix of adapter a1 served adapter a2";
  const EngineResult base = run(nullptr);
  EXPECT_EQ(base.cached_tokens, 0) << "a prefix computed with an adapter served the base model";
  const EngineResult scaled = run(a1_->with_scale(2.0));
  EXPECT_EQ(scaled.cached_tokens, 0) << "a prefix of scale 1 served scale 2";
  const EngineResult again = run(a1_);
  EXPECT_EQ(again.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.continuation.logits, first.continuation.logits);
  // The same adapter and scale made again (with_scale(1)) has the same fingerprint: a hit.
  const EngineResult same = run(a1_->with_scale(1.0));
  EXPECT_EQ(same.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(same.tokens, first.tokens);
  EXPECT_NE(other.continuation.logits, first.continuation.logits);
}

TEST_F(EngineLora, AnAdapterOfAnotherGeometryIsRefusedAtSubmit) {
  const fs::path base = dir_ / "other_base.safetensors";
  write_synthetic_checkpoint(base.string(), parse_synth_geometry("2:128:256"), DType::F32, 3);
  const Model other = Model::load(base.string());
  const auto foreign =
      LoraAdapter::load(write_adapter(other, dir_, "foreign.safetensors", 4, 5), other, {4.0, 1.0});
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  Request r;
  r.prompt = "hello";
  r.config.max_tokens = 3;
  r.adapter = foreign;
  try {
    engine.submit(std::move(r));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("was loaded for a model of"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.stats().submitted, 0u);
}

TEST_F(EngineLora, WithScaleEqualsLoadingWithThatScale) {
  const auto loaded = LoraAdapter::load(a1_->source(), tiny(), {16.0, 0.25});
  const auto scaled = a1_->with_scale(0.25);
  EXPECT_EQ(scaled->fingerprint(), loaded->fingerprint());
  EXPECT_NE(scaled->fingerprint(), a1_->fingerprint());
  EXPECT_DOUBLE_EQ(scaled->scale(), loaded->scale());
  EXPECT_DOUBLE_EQ(scaled->lora_scale(), 0.25);
  const std::vector<int32_t> tokens = {1, 5, 9, 100, 17};
  auto logits = [&](const std::shared_ptr<const LoraAdapter>& a) {
    State s = tiny().new_state();
    return tiny().with_adapter(a).forward(tokens, s, true);
  };
  EXPECT_EQ(logits(scaled), logits(loaded));
  EXPECT_NE(logits(scaled), logits(a1_));
  EXPECT_THROW(a1_->with_scale(std::nan("")), InputError);
  // alpha / r * scale is applied as a float: 16 / 4 * 1e38 is beyond it.
  EXPECT_THROW(a1_->with_scale(1e38), InputError);
}

}  // namespace
}  // namespace wick::test
