// The samplers (docs/tasks.md §1, tests S1-S31 of §9): SplitMix64, the standard sampler (§1.3),
// penalties (§1.2), the ChatRWKV-compatible mode (§1.6), validation, and the lazily sorted order
// checked pick for pick against a naive implementation with a full stable sort.
//
// Synthetic logits L = ln([0.5, 0.3, 0.15, 0.04, 0.01]); frequency tests use n = 2000 draws and a
// tolerance of 0.04 (about 3.5 sigma).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "wick/errors.h"
#include "wick/rng.h"
#include "wick/sampler.h"
#include "wick/tokenizer.h"

namespace wick {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kDraws = 2000;
constexpr double kTol = 0.04;

std::vector<float> ln(std::initializer_list<double> p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

const std::vector<float>& L() {
  static const std::vector<float> l = ln({0.5, 0.3, 0.15, 0.04, 0.01});
  return l;
}

SamplingConfig sampled(float temperature = 1.f, int top_k = 0, float top_p = 1.f,
                       uint64_t seed = 0) {
  SamplingConfig c;
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = top_p;
  c.seed = seed;
  return c;
}

// The chatrwkv sampler without penalties or exemption (pure §1.6 selection).
SamplingConfig chat_mode(float temperature = 1.f, int top_k = 0, float top_p = 1.f,
                         uint64_t seed = 0) {
  SamplingConfig c = sampled(temperature, top_k, top_p, seed);
  c.mode = SamplerMode::kChatRwkv;
  c.presence_penalty = 0;
  c.frequency_penalty = 0;
  c.penalty_decay = 1;
  c.exempt_space_digits = false;
  return c;
}

// `count` consecutive picks (select only, nothing observed).
std::vector<int32_t> picks(const SamplingConfig& c, const std::vector<float>& logits, int count) {
  Sampler s(c, static_cast<int>(logits.size()));
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) out.push_back(s.select(logits));
  return out;
}

std::vector<double> frequencies(const SamplingConfig& c, const std::vector<float>& logits,
                                int n = kDraws) {
  Sampler s(c, static_cast<int>(logits.size()));
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < n; ++i) f[s.select(logits)] += 1.0 / n;
  return f;
}

// Immediate repeats (pick == previous pick) over `steps` select+observe calls.
int immediate_repeats(const SamplingConfig& c, const std::vector<float>& logits, int steps) {
  Sampler s(c, static_cast<int>(logits.size()));
  int repeats = 0, prev = -1;
  for (int i = 0; i < steps; ++i) {
    const int32_t id = s.select(logits);
    s.observe(id);
    repeats += id == prev;
    prev = id;
  }
  return repeats;
}

std::string error_of(const SamplingConfig& c, int vocab = 5) {
  try {
    Sampler s(c, vocab);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// ---- S1: SplitMix64 ---------------------------------------------------------------------------

TEST(SplitMix64, GoldenVectors) {
  SplitMix64 a(0);
  EXPECT_EQ(a.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(a.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(a.next(), 0x06c45d188009454full);
  EXPECT_EQ(a.next(), 0xf88bb8a8724c81ecull);
  SplitMix64 b(42);
  EXPECT_EQ(b.next(), 0xbdd732262feb6e95ull);
  EXPECT_EQ(b.next(), 0x28efe333b266f103ull);
  EXPECT_EQ(b.next(), 0x47526757130f9f52ull);
  EXPECT_EQ(b.next(), 0x581ce1ff0e4ae394ull);
  SplitMix64 u0(0);
  EXPECT_EQ(u0.uniform(), 0.8833108f);
  EXPECT_EQ(u0.uniform(), 0.43152800f);
  EXPECT_EQ(u0.uniform(), 0.026433771f);
  EXPECT_EQ(u0.uniform(), 0.97088200f);
  SplitMix64 u42(42);
  EXPECT_EQ(u42.uniform(), 0.74156487f);
  EXPECT_EQ(u42.uniform(), 0.15991040f);
  EXPECT_EQ(u42.uniform(), 0.27860114f);
  EXPECT_EQ(u42.uniform(), 0.34419072f);
}

TEST(SplitMix64, SameSeedSameStreamOtherSeedOtherStream) {
  SplitMix64 a(42), b(42), c(43);
  std::vector<float> va, vb, vc;
  for (int i = 0; i < 64; ++i) {
    va.push_back(a.uniform());
    vb.push_back(b.uniform());
    vc.push_back(c.uniform());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  EXPECT_EQ(std::set<float>(va.begin(), va.end()).size(), 64u);  // 64 distinct draws
  double mean = 0;
  for (float u : va) {
    EXPECT_GE(u, 0.f);
    EXPECT_LT(u, 1.f);
    mean += u / 64;
  }
  EXPECT_NEAR(mean, 0.5, 0.1);
}

// ---- S2-S14: the standard sampler ---------------------------------------------------------------

TEST(SamplerStandard, GoldenPicksSeed7) {
  const std::vector<int32_t> none = {0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 3, 2, 2, 2, 1, 2, 0, 1, 1};
  const std::vector<int32_t> top_p = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 1};
  const std::vector<int32_t> top_k = {0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 1, 2, 0, 1, 1};
  EXPECT_EQ(picks(sampled(1, 0, 1, 7), L(), 20), none);
  EXPECT_EQ(picks(sampled(1, 0, 0.75f, 7), L(), 20), top_p);
  EXPECT_EQ(picks(sampled(1, 3, 1, 7), L(), 20), top_k);
}

TEST(SamplerStandard, SameSeedSamePicksOtherSeedOtherPicks) {  // S2
  EXPECT_EQ(picks(sampled(1, 0, 1, 7), L(), 40), picks(sampled(1, 0, 1, 7), L(), 40));
  EXPECT_NE(picks(sampled(1, 0, 1, 7), L(), 40), picks(sampled(1, 0, 1, 8), L(), 40));
}

TEST(SamplerStandard, ResetRestoresRngAndClearsHistory) {  // S3
  SamplingConfig c = sampled(1, 0, 1, 3);
  c.presence_penalty = 0.5f;
  c.frequency_penalty = 0.4f;
  Sampler s(c, 5);
  auto run = [&] {
    std::vector<int32_t> out;
    for (int i = 0; i < 20; ++i) {
      out.push_back(s.select(L()));
      s.observe(out.back());
    }
    return out;
  };
  const std::vector<int32_t> first = run();
  EXPECT_FALSE(s.history().empty());
  const std::vector<int32_t> continued = run();
  EXPECT_NE(first, continued);  // without reset the stream and the history move on
  s.reset();
  EXPECT_TRUE(s.history().empty());
  EXPECT_EQ(run(), first);
}

TEST(SamplerStandard, TemperatureZeroIsArgmaxFirstMaximumWins) {  // S4
  EXPECT_EQ(picks(sampled(0), L(), 1)[0], 0);
  EXPECT_EQ(picks(sampled(0), {1, 9, 3}, 1)[0], 1);
  EXPECT_EQ(picks(sampled(0), {5, 7, 7, 1}, 1)[0], 1);  // tie: the lowest id
  EXPECT_EQ(picks(sampled(0), {-kInf, -3, -kInf}, 1)[0], 1);
}

TEST(SamplerStandard, TinyTemperatureReachesArgmaxThroughTheGeneralPath) {  // S5
  for (uint64_t seed = 0; seed < 16; ++seed) {
    EXPECT_EQ(picks(sampled(0.01f, 0, 1, seed), L(), 1)[0], 0) << seed;
  }
  // Not a shortcut: the same temperature on close logits still samples.
  const std::vector<int32_t> close = picks(sampled(0.01f, 0, 1, 0), {1.f, 0.995f, 0.f}, 64);
  EXPECT_NE(std::count(close.begin(), close.end(), 1), 0);
}

TEST(SamplerStandard, TemperatureShapesTheDistribution) {  // S6
  const std::vector<double> cold = frequencies(sampled(0.5f), L());
  const std::vector<double> hot = frequencies(sampled(4.f), L());
  EXPECT_GT(cold[0], hot[0]);
  EXPECT_LT(cold[4], hot[4]);
  const std::vector<double> one = frequencies(sampled(1.f), L());
  const double p[] = {0.5, 0.3, 0.15, 0.04, 0.01};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(one[i], p[i], kTol) << i;
}

TEST(SamplerStandard, TopK1OnlyTheMaximum) {  // S7
  for (uint64_t seed = 0; seed < 16; ++seed) {
    for (int32_t id : picks(sampled(1, 1, 1, seed), L(), 8)) EXPECT_EQ(id, 0) << seed;
  }
  // Different logits, different maximum.
  EXPECT_EQ(picks(sampled(1, 1, 1, 0), ln({0.1, 0.2, 0.6, 0.1}), 1)[0], 2);
}

TEST(SamplerStandard, TopK3Renormalises) {  // S8
  const std::vector<double> f = frequencies(sampled(1, 3), L());
  EXPECT_EQ(f[3], 0.0);
  EXPECT_EQ(f[4], 0.0);
  EXPECT_NEAR(f[0], 0.5 / 0.95, kTol);
  EXPECT_NEAR(f[1], 0.3 / 0.95, kTol);
  EXPECT_NEAR(f[2], 0.15 / 0.95, kTol);
}

TEST(SamplerStandard, TopKAboveVocabEqualsNoTopK) {  // S9
  EXPECT_EQ(picks(sampled(1, 999, 1, 5), L(), 200), picks(sampled(1, 0, 1, 5), L(), 200));
  EXPECT_NE(picks(sampled(1, 3, 1, 5), L(), 200), picks(sampled(1, 0, 1, 5), L(), 200));
}

TEST(SamplerStandard, TopP075KeepsTwoIds) {  // S10
  const std::vector<double> f = frequencies(sampled(1, 0, 0.75f), L());
  EXPECT_EQ(f[2] + f[3] + f[4], 0.0);
  EXPECT_NEAR(f[0], 0.625, kTol);
  EXPECT_NEAR(f[1], 0.375, kTol);
}

TEST(SamplerStandard, TinyTopPKeepsTheMode) {  // S11
  for (int32_t id : picks(sampled(1, 0, 0.001f, 9), L(), 200)) EXPECT_EQ(id, 0);
  EXPECT_EQ(picks(sampled(1, 0, 0.001f, 9), ln({0.2, 0.7, 0.1}), 1)[0], 1);
}

TEST(SamplerStandard, TopPBoundaryIsInclusive) {  // S12
  const std::vector<int32_t> p = picks(sampled(1, 0, 0.5f, 1), {2, 2, 2, 2}, kDraws);
  EXPECT_EQ(std::set<int32_t>(p.begin(), p.end()), (std::set<int32_t>{0, 1}));
  const std::vector<int32_t> q = picks(sampled(1, 0, 0.51f, 1), {2, 2, 2, 2}, kDraws);
  EXPECT_EQ(std::set<int32_t>(q.begin(), q.end()).size(), 3u);  // just above: a third id
}

TEST(SamplerStandard, TopP1EqualsNoTopP) {  // S13
  SamplingConfig unset = sampled(1, 0, 1, 11);
  SamplingConfig one = unset;
  one.top_p = 1.0f;
  EXPECT_EQ(picks(one, L(), 300), picks(unset, L(), 300));
  EXPECT_NE(picks(sampled(1, 0, 0.75f, 11), L(), 300), picks(unset, L(), 300));
}

TEST(SamplerStandard, TopKAndTopPIntersect) {  // S14
  const std::vector<double> f = frequencies(sampled(1, 2, 0.95f), L());
  EXPECT_EQ(f[2] + f[3] + f[4], 0.0);
  EXPECT_NEAR(f[0], 0.625, kTol);
  EXPECT_NEAR(f[1], 0.375, kTol);
}

// ---- S15-S22: penalties ------------------------------------------------------------------------

TEST(SamplerPenalty, CtrlLowersEveryObservedLogit) {  // S15
  SamplingConfig c = sampled(1);
  c.repetition_penalty = 2;
  Sampler s(c, 4);
  const std::vector<float> logits = {2, -2, 0.5f, -0.5f};
  EXPECT_EQ(s.adjusted_logits(logits), logits);  // nothing observed yet
  for (int32_t id : {0, 1, 2, 3}) s.observe(id);
  EXPECT_EQ(s.adjusted_logits(logits), (std::vector<float>{1, -4, 0.25f, -1}));
  EXPECT_EQ(s.adjusted_logits(std::vector<float>{0, 0, 0, 0}),
            (std::vector<float>{0, 0, 0, 0}));  // 0 stays 0
}

TEST(SamplerPenalty, UnobservedIdsUntouched) {  // S16
  SamplingConfig c = sampled(1);
  c.repetition_penalty = 1.5f;
  c.presence_penalty = 0.7f;
  c.frequency_penalty = 0.3f;
  Sampler s(c, 5);
  s.observe(2);
  const std::vector<float> a = s.adjusted_logits(L());
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(a[i], L()[i]) << i;
  EXPECT_LT(a[2], L()[2]);
}

TEST(SamplerPenalty, PresenceAndFrequency) {  // S17
  SamplingConfig c = sampled(1);
  c.presence_penalty = 0.3f;
  c.frequency_penalty = 0.2f;
  Sampler s(c, 3);
  const std::vector<float> zero = {0, 0, 0};
  s.observe(1);
  EXPECT_FLOAT_EQ(s.adjusted_logits(zero)[1], -0.5f);
  s.observe(1);
  EXPECT_FLOAT_EQ(s.adjusted_logits(zero)[1], -0.7f);
  EXPECT_EQ(s.adjusted_logits(zero)[0], 0.f);
}

TEST(SamplerPenalty, DecayedHistory) {  // S18
  SamplingConfig c = sampled(1);
  c.penalty_decay = 0.5f;
  c.presence_penalty = 0.1f;
  Sampler s(c, 5);
  s.observe(0);
  s.observe(1);
  EXPECT_EQ(s.history(), (std::unordered_map<int32_t, float>{{0, 0.5f}, {1, 1.f}}));
  s.observe(2);
  EXPECT_EQ(s.history(), (std::unordered_map<int32_t, float>{{0, 0.25f}, {1, 0.5f}, {2, 1.f}}));
  // Weights below 1e-6 are pruned; decay 0 keeps only the last token.
  for (int i = 0; i < 25; ++i) s.observe(3);
  EXPECT_EQ(s.history().count(0), 0u);
  c.penalty_decay = 0;
  Sampler z(c, 5);
  z.observe(0);
  z.observe(1);
  EXPECT_EQ(z.history(), (std::unordered_map<int32_t, float>{{1, 1.f}}));
}

TEST(SamplerPenalty, CtrlMovesMassAwayFromTheObservedMode) {  // S19
  SamplingConfig c = sampled(1, 0, 1, 4);
  c.repetition_penalty = 3;
  Sampler s(c, 5);
  s.observe(0);
  std::vector<double> f(5, 0.0);
  for (int i = 0; i < kDraws; ++i) f[s.select(L())] += 1.0 / kDraws;
  const std::vector<double> plain = frequencies(sampled(1, 0, 1, 4), L());
  EXPECT_LT(f[0], plain[0] - 0.05);
  EXPECT_GT(f[1], plain[1]);
}

TEST(SamplerPenalty, FrequencyWithDecayReducesRepeats) {  // S20
  SamplingConfig c = sampled(1, 0, 1, 0);
  const int plain = immediate_repeats(c, L(), 300);
  c.frequency_penalty = 0.7f;
  c.penalty_decay = 0.6f;
  EXPECT_LT(immediate_repeats(c, L(), 300), plain);
}

TEST(SamplerPenalty, CtrlOnNegativeLogitsIncreasesRepeatsPinnedProperty) {  // S21, §1.5
  int plain = 0, ctrl = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    SamplingConfig c = sampled(1, 0, 1, seed);
    plain += immediate_repeats(c, L(), 300);
    c.repetition_penalty = 3;
    c.penalty_decay = 0.5f;
    ctrl += immediate_repeats(c, L(), 300);
  }
  EXPECT_GT(ctrl, plain);
}

TEST(SamplerPenalty, GreedyConsumesNoRandomnessAndIsPenalised) {  // S22
  auto run = [](uint64_t seed, const std::vector<float>& logits) {
    SamplingConfig c = sampled(0, 0, 1, seed);
    c.presence_penalty = 0.4f;
    c.frequency_penalty = 0.3f;
    Sampler s(c, 5);
    std::vector<int32_t> out;
    for (int i = 0; i < 30; ++i) {
      out.push_back(s.select(logits));
      s.observe(out.back());
    }
    return out;
  };
  const std::vector<int32_t> a = run(1, L());
  EXPECT_EQ(a, run(999, L()));
  EXPECT_NE(std::set<int32_t>(a.begin(), a.end()).size(), 1u);  // the penalties move the argmax
  EXPECT_NE(a, run(1, ln({0.01, 0.04, 0.15, 0.3, 0.5})));
}

TEST(SamplerStandard, UniformLogitsAndSingleIdVocabulary) {  // S23
  const std::vector<double> f = frequencies(sampled(1), {0, 0, 0, 0, 0});
  for (double x : f) EXPECT_NEAR(x, 0.2, kTol);
  for (int32_t id : picks(sampled(1, 0, 0.5f), {3.f}, 20)) EXPECT_EQ(id, 0);
}

// ---- S24: validation ---------------------------------------------------------------------------

TEST(SamplerConfig, RejectsOutOfRangeValuesNamingTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* field;
    std::function<void(SamplingConfig&)> set;
  };
  const std::vector<Case> cases = {
      {"temperature", [](SamplingConfig& c) { c.temperature = -0.5f; }},
      {"temperature", [=](SamplingConfig& c) { c.temperature = nan; }},
      {"temperature", [](SamplingConfig& c) { c.temperature = kInf; }},
      {"top_k", [](SamplingConfig& c) { c.top_k = -1; }},
      {"top_p", [](SamplingConfig& c) { c.top_p = 0; }},
      {"top_p", [](SamplingConfig& c) { c.top_p = 1.5f; }},
      {"top_p", [](SamplingConfig& c) { c.top_p = -0.1f; }},
      {"top_p", [=](SamplingConfig& c) { c.top_p = nan; }},
      {"repetition_penalty", [](SamplingConfig& c) { c.repetition_penalty = 0; }},
      {"repetition_penalty", [](SamplingConfig& c) { c.repetition_penalty = -1; }},
      {"repetition_penalty", [=](SamplingConfig& c) { c.repetition_penalty = nan; }},
      {"presence_penalty", [=](SamplingConfig& c) { c.presence_penalty = nan; }},
      {"frequency_penalty", [=](SamplingConfig& c) { c.frequency_penalty = nan; }},
      {"penalty_decay", [](SamplingConfig& c) { c.penalty_decay = 1.01f; }},
      {"penalty_decay", [](SamplingConfig& c) { c.penalty_decay = -0.1f; }},
      {"penalty_decay", [=](SamplingConfig& c) { c.penalty_decay = nan; }},
      {"logit_bias",
       [](SamplingConfig& c) {
         c.logit_bias = {{5, 1.f}};
       }},
      {"logit_bias",
       [](SamplingConfig& c) {
         c.logit_bias = {{-1, 1.f}};
       }},
      {"logit_bias",
       [=](SamplingConfig& c) {
         c.logit_bias = {{1, nan}};
       }},
      {"banned_tokens", [](SamplingConfig& c) { c.banned_tokens = {7}; }},
  };
  for (const Case& k : cases) {
    SamplingConfig c = sampled(1);
    k.set(c);
    const std::string message = error_of(c);
    EXPECT_NE(message.find(k.field), std::string::npos) << k.field << ": '" << message << "'";
  }
  // The boundaries themselves are valid.
  for (float top_p : {1.f, 1e-6f}) EXPECT_EQ(error_of(sampled(1, 0, top_p)), "");
  SamplingConfig edge = sampled(0, 0, 1);
  edge.penalty_decay = 0;
  EXPECT_EQ(error_of(edge), "");
  edge.penalty_decay = 1;
  edge.repetition_penalty = 0.01f;
  EXPECT_EQ(error_of(edge), "");
  // The message says what was found.
  EXPECT_NE(error_of(sampled(1, -3)).find("-3"), std::string::npos);
  // The vocabulary is checked only when known.
  SamplingConfig far = sampled(1);
  far.banned_tokens = {100000};
  EXPECT_NO_THROW(far.validate());
  EXPECT_THROW(far.validate(5), InputError);
}

TEST(SamplerConfig, ChatRwkvRanges) {
  EXPECT_EQ(error_of(chat_mode(1, 0, 0)), "");  // top_p 0 is valid there
  EXPECT_EQ(error_of(chat_mode(0, 0, 1)), "");
  EXPECT_NE(error_of(chat_mode(1, 0, 1.2f)).find("top_p"), std::string::npos);
  SamplingConfig rp = chat_mode();
  rp.repetition_penalty = 1.2f;
  EXPECT_NE(error_of(rp).find("repetition_penalty"), std::string::npos);
  SamplingConfig exempt = chat_mode();
  exempt.exempt_space_digits = true;  // needs token_bytes
  EXPECT_NE(error_of(exempt).find("token_bytes"), std::string::npos);
  EXPECT_NO_THROW(Sampler(exempt, 5, [](int32_t) { return std::string("x"); }));
}

TEST(SamplerConfig, DefaultsAndNames) {
  const SamplingConfig d;
  EXPECT_EQ(d.mode, SamplerMode::kStandard);
  EXPECT_EQ(d.temperature, 0.f);
  EXPECT_EQ(d.top_k, 0);
  EXPECT_EQ(d.top_p, 1.f);
  EXPECT_EQ(d.repetition_penalty, 1.f);
  EXPECT_EQ(d.penalty_decay, 1.f);
  const SamplingConfig pipe = SamplingConfig::chatrwkv_pipeline();
  EXPECT_EQ(pipe.mode, SamplerMode::kChatRwkv);
  EXPECT_EQ(pipe.temperature, 1.f);
  EXPECT_EQ(pipe.top_p, 0.85f);
  EXPECT_EQ(pipe.presence_penalty, 0.2f);
  EXPECT_EQ(pipe.frequency_penalty, 0.2f);
  EXPECT_EQ(pipe.penalty_decay, 0.996f);
  EXPECT_TRUE(pipe.exempt_space_digits);
  EXPECT_TRUE(pipe.logit_bias.empty());
  const SamplingConfig chat = SamplingConfig::chatrwkv_chat();
  EXPECT_EQ(chat.top_p, 0.3f);
  EXPECT_EQ(chat.presence_penalty, 0.5f);
  EXPECT_EQ(chat.frequency_penalty, 0.5f);
  EXPECT_FALSE(chat.exempt_space_digits);
  ASSERT_EQ(chat.logit_bias.size(), 1u);
  EXPECT_EQ(chat.logit_bias[0], (std::pair<int32_t, float>{0, -1e10f}));
  EXPECT_EQ(sampler_mode_name(SamplerMode::kStandard), "standard");
  EXPECT_EQ(sampler_mode_name(SamplerMode::kChatRwkv), "chatrwkv");
  EXPECT_EQ(parse_sampler_mode("chatrwkv"), SamplerMode::kChatRwkv);
  EXPECT_EQ(parse_sampler_mode("standard"), SamplerMode::kStandard);
  EXPECT_THROW(parse_sampler_mode("nucleus"), InputError);
}

TEST(SamplerInput, BadLogitsAndIds) {
  for (const SamplingConfig& c : {sampled(0), sampled(1), chat_mode()}) {
    Sampler s(c, 5);
    EXPECT_THROW(s.select(std::vector<float>(4, 0.f)), InputError);
    EXPECT_THROW(s.observe(5), InputError);
    EXPECT_THROW(s.observe(-1), InputError);
    try {
      s.select(std::vector<float>{-kInf, -kInf, -kInf, -kInf, -kInf});
      ADD_FAILURE() << "no throw";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("-inf"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Sampler(sampled(1), 0), InputError);
  // A failed select draws nothing: the next pick equals a fresh sampler's first.
  SamplingConfig c = sampled(1, 0, 1, 21);
  c.banned_tokens = {0, 1, 2, 3};
  Sampler s(c, 5), fresh(c, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(s.select(std::vector<float>{1, 1, 1, 1, nan}), InputError);
  const std::vector<float> other = {0, 0, 0, 0, 1};
  EXPECT_EQ(s.select(other), fresh.select(other));
}

// NaN weights or a NaN state make every logit NaN; the error used to blame logit_bias, bans and
// penalties. Now it says the model produced non-finite logits (and only then).
TEST(SamplerInput, AllNonFiniteLogitsAreTheModelsFault) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto message = [](const SamplingConfig& c, const std::vector<float>& logits) -> std::string {
    Sampler s(c, static_cast<int>(logits.size()));
    try {
      s.select(logits);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no throw";
  };
  for (const SamplingConfig& c : {sampled(0), sampled(1), chat_mode()}) {
    const std::string m = message(c, {nan, nan, -kInf, nan});
    EXPECT_NE(m.find("the model produced non-finite logits"), std::string::npos) << m;
    EXPECT_NE(m.find("3 NaN"), std::string::npos) << m;
    SamplingConfig banned = c;
    banned.banned_tokens = {0, 1, 2, 3};
    const std::string b = message(banned, {1, 2, 3, 4});
    EXPECT_EQ(b.find("the model produced"), std::string::npos) << b;
    EXPECT_NE(b.find("banned_tokens"), std::string::npos) << b;
  }
}

TEST(SamplerStandard, NanNeverWinsAndBiasBanApplyFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1, nan, 3, 2};
  for (const SamplingConfig& c : {sampled(0), sampled(1, 0, 1, 2), chat_mode(1, 0, 0.9f, 2)}) {
    for (int32_t id : picks(c, logits, 200)) EXPECT_NE(id, 1);
  }
  SamplingConfig bias = sampled(0);
  bias.logit_bias = {{0, 5.f}};
  EXPECT_EQ(picks(bias, logits, 1)[0], 0);  // 1 + 5 beats 3
  bias.banned_tokens = {0};
  EXPECT_EQ(picks(bias, logits, 1)[0], 2);  // banned after the bias
  SamplingConfig ban = sampled(1, 0, 1, 8);
  ban.banned_tokens = {0, 2};
  const std::vector<double> f = frequencies(ban, L());
  EXPECT_EQ(f[0] + f[2], 0.0);
  EXPECT_NEAR(f[1], 0.3 / 0.35, kTol);
  // +inf forces (ties among +inf share the mass).
  for (int32_t id : picks(sampled(1, 0, 1, 3), {0, kInf, 5, kInf}, 200))
    EXPECT_TRUE(id == 1 || id == 3);
}

// u == mass (uniform() returned 1.0f): the walk finds no u < acc and falls back to the last kept
// position, skipping ids of zero probability, so a banned id never comes out.
constexpr uint64_t kSeedUniformOne = 63433462;  // SplitMix64(seed).uniform() == 1.0f

TEST(SamplerStandard, FallbackAtUEqualsMassNeverReturnsAZeroProbabilityId) {
  ASSERT_EQ(SplitMix64(kSeedUniformOne).uniform(), 1.0f);
  ASSERT_NE(SplitMix64(kSeedUniformOne + 1).uniform(), 1.0f);
  // Order: id 3, id 1, id 0, then id 2 (-inf) and id 4 (banned).
  SamplingConfig c = sampled(1, 0, 1, kSeedUniformOne);
  c.banned_tokens = {4};
  const std::vector<float> logits = {0, 1, -kInf, 2, 5};
  EXPECT_EQ(picks(c, logits, 1)[0], 0);
  c.mode = SamplerMode::kChatRwkv;
  c.exempt_space_digits = false;
  EXPECT_EQ(picks(c, logits, 1)[0], 0);
  // Without zero probabilities the fallback is the last kept position (§1.3 step 9).
  EXPECT_EQ(picks(sampled(1, 0, 1, kSeedUniformOne), {3, 2, 1}, 1)[0], 2);
  EXPECT_EQ(picks(sampled(1, 2, 1, kSeedUniformOne), {3, 2, 1}, 1)[0], 1);
}

TEST(SamplerStandard, CopyContinuesTheSameStream) {
  SamplingConfig c = sampled(1, 0, 0.9f, 12);
  c.presence_penalty = 0.3f;
  Sampler a(c, 5);
  for (int i = 0; i < 5; ++i) a.observe(a.select(L()));
  Sampler b = a;
  for (int i = 0; i < 20; ++i) {
    const int32_t x = a.select(L());
    EXPECT_EQ(x, b.select(L()));
    a.observe(x);
    b.observe(x);
  }
  Sampler moved = std::move(b);
  EXPECT_EQ(moved.select(L()), a.select(L()));
}

// A snapshot restored into a fresh sampler of the same config continues the stream and the
// penalties exactly (state files v2); a fresh sampler without it draws otherwise.
TEST(SamplerStandard, SnapshotRestoredContinuesTheSameStream) {
  SamplingConfig c = sampled(1, 0, 0.9f, 12);
  c.presence_penalty = 0.3f;
  c.frequency_penalty = 0.2f;
  c.penalty_decay = 0.9f;
  Sampler a(c, 5);
  for (int i = 0; i < 7; ++i) a.observe(a.select(L()));
  const SamplerSnapshot snap = a.snapshot();
  EXPECT_EQ(snap.mode, SamplerMode::kStandard);
  EXPECT_FALSE(snap.history.empty());
  EXPECT_TRUE(std::is_sorted(snap.history.begin(), snap.history.end()));
  Sampler b(c, 5), fresh(c, 5);
  b.restore(snap);
  EXPECT_EQ(b.snapshot(), snap);
  std::vector<int32_t> xa, xb, xf;
  for (int i = 0; i < 30; ++i) {
    xa.push_back(a.select(L()));
    a.observe(xa.back());
    xb.push_back(b.select(L()));
    b.observe(xb.back());
    xf.push_back(fresh.select(L()));
    fresh.observe(xf.back());
  }
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xf);
  // Refused, sampler unchanged: another mode, an id outside [0, V), repeated ids, bad weights.
  const SamplerSnapshot before = b.snapshot();
  SamplerSnapshot other = snap;
  other.mode = SamplerMode::kChatRwkv;
  EXPECT_THROW(b.restore(other), InputError);
  other = snap;
  other.history.push_back({5, 1.f});
  EXPECT_THROW(b.restore(other), InputError);
  other = snap;
  other.history.push_back(other.history.back());
  EXPECT_THROW(b.restore(other), InputError);
  other = snap;
  other.history[0].second = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(b.restore(other), InputError);
  other.history[0].second = -1.f;
  EXPECT_THROW(b.restore(other), InputError);
  EXPECT_EQ(b.snapshot(), before);
}

// ---- ChatRWKV-compatible mode (S25-S31) ---------------------------------------------------------

TEST(ChatRwkvSampler, TiesAtTheCutSurvive) {  // S25
  const std::vector<float> logits = ln({0.4, 0.2, 0.2, 0.2});
  const std::vector<double> f = frequencies(chat_mode(1, 0, 0.5f), logits);
  const double p[] = {0.4, 0.2, 0.2, 0.2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], p[i], kTol) << i;
  const std::vector<double> standard = frequencies(sampled(1, 0, 0.5f), logits);
  EXPECT_EQ(standard[2] + standard[3], 0.0);  // the standard sampler keeps exactly 2 ids
}

TEST(ChatRwkvSampler, TemperatureAfterTheCut) {  // S26
  const std::vector<double> f = frequencies(chat_mode(2, 0, 0.75f), L());
  EXPECT_EQ(f[2] + f[3] + f[4], 0.0);
  EXPECT_NEAR(f[0], 0.5635, kTol);
  EXPECT_NEAR(f[1], 0.4365, kTol);
  const std::vector<double> standard = frequencies(sampled(2, 0, 0.75f), L());
  EXPECT_GT(standard[2], 0.0);
  EXPECT_EQ(standard[3] + standard[4], 0.0);
}

TEST(ChatRwkvSampler, TemperatureZeroKeepsTheMaximumAndItsTiesWithOneDrawPerToken) {  // S27
  for (int32_t id : picks(chat_mode(0, 0, 0.85f, 3), L(), 100)) EXPECT_EQ(id, 0);
  const std::vector<float> tie = {1, 1, 0};
  const std::vector<int32_t> got = picks(chat_mode(0, 0, 0.85f, 3), tie, 200);
  EXPECT_GT(std::count(got.begin(), got.end(), 0), 0);
  EXPECT_GT(std::count(got.begin(), got.end(), 1), 0);
  EXPECT_EQ(std::count(got.begin(), got.end(), 2), 0);
  // Exactly one uniform() per token: replay the stream by hand.
  const std::vector<float> p = softmax(tie);
  SplitMix64 rng(3);
  for (int32_t id : got) {
    const float u = rng.uniform() * (p[0] + p[1]);
    EXPECT_EQ(id, u < p[0] ? 0 : 1);
  }
}

TEST(ChatRwkvSampler, TopP1KeepsEverythingTopK1EqualsTemperatureZero) {  // S28
  const std::vector<double> f = frequencies(chat_mode(1, 0, 1), L());
  const double p[] = {0.5, 0.3, 0.15, 0.04, 0.01};
  for (int i = 0; i < 5; ++i) {
    EXPECT_GT(f[i], 0.0) << i;
    EXPECT_NEAR(f[i], p[i], kTol) << i;
  }
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0, 2);
  Sampler k1(chat_mode(1, 1, 0.85f, 6), 50), t0(chat_mode(0, 0, 0.85f, 6), 50);
  int changes = 0, prev = -1;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> logits(50);
    for (float& x : logits) x = normal(gen);
    const int32_t a = k1.select(logits);
    EXPECT_EQ(a, t0.select(logits));
    changes += a != prev;
    prev = a;
  }
  EXPECT_GT(changes, 10);  // different logits, different picks
}

const Tokenizer& world() {
  static const std::unique_ptr<Tokenizer> tok = default_world_tokenizer();
  return *tok;
}

std::string world_bytes(int32_t id) {
  try {
    return world().decode(std::span<const int32_t>(&id, 1));
  } catch (const InputError&) {
    return {};
  }
}

TEST(ChatRwkvSampler, SpaceAndDigitTokensEnterTheHistoryWithWeightZero) {  // S29
  SamplingConfig c = chat_mode();
  c.penalty_decay = 0.5f;
  c.presence_penalty = 0.3f;
  c.frequency_penalty = 0.2f;
  c.exempt_space_digits = true;
  const int vocab = 65536;
  Sampler s(c, vocab, world_bytes);
  ASSERT_EQ(world_bytes(33), " ");
  ASSERT_EQ(world_bytes(56), "7");
  ASSERT_EQ(world_bytes(121), "x");
  for (int32_t id : {33, 56, 121}) s.observe(id);
  EXPECT_EQ(s.history(), (std::unordered_map<int32_t, float>{{33, 0.f}, {56, 0.f}, {121, 1.f}}));
  const std::vector<float> zero(vocab, 0.f);
  const std::vector<float> a = s.adjusted_logits(zero);
  EXPECT_FLOAT_EQ(a[33], -0.3f);
  EXPECT_FLOAT_EQ(a[56], -0.3f);
  EXPECT_FLOAT_EQ(a[121], -0.5f);
  EXPECT_EQ(a[122], 0.f);
  // Chat defaults: no exemption, every token counts 1.
  SamplingConfig chat = SamplingConfig::chatrwkv_chat();
  chat.penalty_decay = 0.5f;
  Sampler t(chat, vocab);
  for (int32_t id : {33, 56, 121}) t.observe(id);
  EXPECT_EQ(t.history(), (std::unordered_map<int32_t, float>{{33, 0.25f}, {56, 0.5f}, {121, 1.f}}));
  // "12" is exempt, "20" is not.
  ASSERT_EQ(world_bytes(632), "12");
  ASSERT_EQ(world_bytes(640), "20");
  Sampler u(c, vocab, world_bytes);
  u.observe(632);
  u.observe(640);
  EXPECT_EQ(u.history(), (std::unordered_map<int32_t, float>{{632, 0.f}, {640, 1.f}}));
}

TEST(ChatRwkvSampler, ExactlyTwentyTwoWorldIdsAreExempt) {  // §1.6 H2 [DERIVED]
  std::vector<int32_t> exempt;
  for (int32_t id = 0; id < world().vocab_size(); ++id) {
    if (chatrwkv_exempt_text(world_bytes(id))) exempt.push_back(id);
  }
  const std::vector<int32_t> expected = {10, 33,  49,  50,  51,  52,  53,  54,  55,  56,  57,
                                         58, 264, 621, 632, 643, 654, 665, 676, 687, 698, 709};
  EXPECT_EQ(exempt, expected);
  EXPECT_FALSE(chatrwkv_exempt_text(""));
  EXPECT_FALSE(chatrwkv_exempt_text("19"));
  EXPECT_TRUE(chatrwkv_exempt_text("789"));
}

TEST(ChatRwkvSampler, HistoryIsNeverPruned) {  // S30
  SamplingConfig c = chat_mode();
  c.presence_penalty = 0.4f;
  c.frequency_penalty = 0.2f;
  c.penalty_decay = 0.996f;
  Sampler s(c, 300);
  SamplingConfig standard = sampled(1);
  standard.presence_penalty = 0.4f;
  standard.penalty_decay = 0.996f;
  Sampler t(standard, 300);
  s.observe(5);
  t.observe(5);
  for (int i = 0; i < 5000; ++i) {
    s.observe(100 + i % 100);
    t.observe(100 + i % 100);
  }
  ASSERT_EQ(s.history().count(5), 1u);
  EXPECT_LT(s.history().at(5), 1e-6f);
  const std::vector<float> zero(300, 0.f);
  EXPECT_NEAR(s.adjusted_logits(zero)[5], -0.4f, 1e-6);
  EXPECT_EQ(s.adjusted_logits(zero)[6], 0.f);
  EXPECT_EQ(t.history().count(5), 0u);  // the standard sampler prunes below 1e-6
  EXPECT_EQ(t.adjusted_logits(zero)[5], 0.f);
}

TEST(ChatRwkvSampler, BannedIdsNeverAppearChatDefaultsNeverEndTheText) {  // S31
  SamplingConfig c = chat_mode(1, 0, 1, 4);
  c.banned_tokens = {0};
  const std::vector<double> f = frequencies(c, L());
  EXPECT_EQ(f[0], 0.0);
  EXPECT_NEAR(f[1], 0.6, kTol);
  SamplingConfig chat = SamplingConfig::chatrwkv_chat();
  chat.top_p = 1;  // id 0 would be the most probable
  Sampler s(chat, 5);
  for (int i = 0; i < kDraws; ++i) EXPECT_NE(s.select(L()), 0);
  // Ids 1 and 2 tie at the cut of the chat defaults' top_p 0.3: the seed decides between them.
  chat = SamplingConfig::chatrwkv_chat();
  chat.seed = 77;
  const std::vector<float> flat = ln({0.1, 0.25, 0.25, 0.2, 0.2});
  const std::vector<int32_t> a = picks(chat, flat, 200);
  EXPECT_EQ(a, picks(chat, flat, 200));
  EXPECT_EQ(std::set<int32_t>(a.begin(), a.end()), (std::set<int32_t>{1, 2}));
  SamplingConfig other = chat;
  other.seed = 78;
  EXPECT_NE(a, picks(other, flat, 200));
}

TEST(ChatRwkvSampler, PromptIsNeverObserved) {
  SamplingConfig c = chat_mode();
  c.presence_penalty = 0.5f;
  Sampler s(c, 5);
  const std::vector<int32_t> prompt = {1, 2, 3};
  s.observe_prompt(prompt);
  EXPECT_TRUE(s.history().empty());
  SamplingConfig d = sampled(1);
  d.presence_penalty = 0.5f;
  Sampler t(d, 5);
  t.observe_prompt(prompt);
  EXPECT_EQ(t.history().size(), 3u);
}

// ---- softmax ---------------------------------------------------------------------------------

TEST(SamplerSoftmax, MatchesExpAndHandlesInfinities) {
  const std::vector<float> z = {1.5f, -2.f, 0.f, 7.25f, -kInf, -30.f};
  const std::vector<float> p = softmax(z);
  double sum = 0;
  for (float x : z) sum += std::isinf(x) ? 0 : std::exp(static_cast<double>(x) - 7.25);
  for (size_t i = 0; i < z.size(); ++i) {
    const double want = std::isinf(z[i]) ? 0 : std::exp(static_cast<double>(z[i]) - 7.25) / sum;
    EXPECT_NEAR(p[i], want, 1e-6 * want + 1e-30) << i;
  }
  EXPECT_EQ(p[4], 0.f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(softmax(std::vector<float>{nan, 0.f}), (std::vector<float>{0.f, 1.f}));
  EXPECT_EQ(softmax(std::vector<float>{kInf, 0.f, kInf}), (std::vector<float>{0.5f, 0.f, 0.5f}));
  EXPECT_THROW(softmax(std::vector<float>{-kInf, nan}), InputError);
  EXPECT_THROW(softmax(std::vector<float>{}), InputError);
  EXPECT_NE(softmax(std::vector<float>{1.f, 0.f}), softmax(std::vector<float>{0.f, 1.f}));
}

// ---- the lazy order against a naive full stable sort -----------------------------------------

// §1.3 / §1.6 written the obvious way: every id sorted (std::stable_sort, so ties keep ascending
// ids), f32 running sums, one draw. Shares only softmax() (the exact probabilities) with wick.
class NaiveSampler {
 public:
  NaiveSampler(SamplingConfig c, int vocab) : c_(std::move(c)), vocab_(vocab), rng_(c_.seed) {}

  int32_t select(const std::vector<float>& logits) {
    std::vector<float> w = adjust(logits);
    return c_.mode == SamplerMode::kStandard ? standard(w) : chatrwkv(w);
  }

  void observe(int32_t id) {
    const float d = c_.penalty_decay;
    if (c_.mode == SamplerMode::kStandard) {
      if (d == 0) hist_.clear();
      if (d != 0 && d != 1) {
        std::unordered_map<int32_t, float> kept;
        for (auto [k, v] : hist_) {
          if (v * d >= 1e-6f) kept[k] = v * d;
        }
        hist_ = kept;
      }
    } else {
      for (auto& kv : hist_) kv.second *= d;
    }
    hist_[id] += 1;
  }

 private:
  std::vector<float> adjust(const std::vector<float>& logits) const {
    std::vector<float> w = logits;
    for (float& x : w) {
      if (std::isnan(x)) x = -kInf;
    }
    for (auto [id, b] : c_.logit_bias) w[id] += b;
    for (int32_t id : c_.banned_tokens) w[id] = -kInf;
    const bool standard = c_.mode == SamplerMode::kStandard;
    const bool active = !standard || c_.repetition_penalty != 1 || c_.presence_penalty != 0 ||
                        c_.frequency_penalty != 0;
    if (!active) return w;
    for (auto [id, weight] : hist_) {
      float x = w[id];
      if (standard && c_.repetition_penalty != 1) {
        x = x > 0 ? x / c_.repetition_penalty : x * c_.repetition_penalty;
      }
      x -= weight * c_.frequency_penalty + c_.presence_penalty;
      w[id] = x;
    }
    return w;
  }

  std::vector<int32_t> order_by(const std::vector<float>& v) const {
    std::vector<int32_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
    return order;
  }

  template <class Weight>
  int32_t draw(const std::vector<int32_t>& order, size_t kept, float mass, Weight weight) {
    const float u = rng_.uniform() * mass;
    float acc = 0;
    for (size_t i = 0; i < kept; ++i) {
      acc += weight(order[i]);
      if (u < acc) return order[i];
    }
    for (size_t i = kept; i-- > 0;) {
      if (weight(order[i]) > 0) return order[i];
    }
    return -1;
  }

  int32_t standard(std::vector<float>& w) {
    if (c_.temperature <= 0)
      return static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin());
    for (float& x : w) x = x / c_.temperature;
    const std::vector<float> p = softmax(w);
    const std::vector<int32_t> order = order_by(w);
    const size_t limit = c_.top_k > 0 ? std::min<size_t>(c_.top_k, w.size()) : w.size();
    size_t kept = 0;
    float mass = 0;
    while (kept < limit) {
      mass += p[order[kept]];
      ++kept;
      if (mass >= c_.top_p) break;
    }
    return draw(order, kept, mass, [&](int32_t id) { return p[id]; });
  }

  int32_t chatrwkv(std::vector<float>& w) {
    float t = c_.temperature, top_p = c_.top_p;
    if (t == 0) {
      t = 1;
      top_p = 0;
    }
    const std::vector<float> p = softmax(w);
    const std::vector<int32_t> order = order_by(p);
    size_t kept = p.size();
    if (top_p < 1) {
      float acc = 0;
      size_t at = 0;
      for (size_t i = 0; i < order.size(); ++i) {
        acc += p[order[i]];
        if (acc >= top_p) {
          at = i;
          break;
        }
      }
      const float cutoff = p[order[at]];
      kept = 0;
      while (kept < order.size() && p[order[kept]] >= cutoff) ++kept;
    }
    if (c_.top_k > 0 && static_cast<size_t>(c_.top_k) < p.size()) {
      kept = std::min<size_t>(kept, c_.top_k);
    }
    const float p0 = p[order[0]];
    std::vector<float> q(p.size(), 0.f);
    for (size_t i = 0; i < kept; ++i) {
      const int32_t id = order[i];
      q[id] = t != 1 ? std::pow(p[id] / p0, 1.0f / t) : p[id];
    }
    float total = 0;
    for (size_t i = 0; i < kept; ++i) total += q[order[i]];
    return draw(order, kept, total, [&](int32_t id) { return q[id]; });
  }

  SamplingConfig c_;
  int vocab_;
  SplitMix64 rng_;
  std::unordered_map<int32_t, float> hist_;
};

// Random logits with the shapes that stress the order: wide and narrow spreads, quantised values
// (many exact ties), -inf entries, a few dominant ids.
std::vector<float> random_logits(std::mt19937_64& gen, int vocab) {
  std::uniform_int_distribution<int> pick(0, 5);
  const float spreads[] = {0.02f, 0.5f, 2.f, 4.f, 9.f, 30.f};
  std::normal_distribution<float> normal(0, spreads[pick(gen)]);
  const bool quantise = pick(gen) < 3;
  std::uniform_real_distribution<float> unit(0, 1);
  std::vector<float> logits(vocab);
  for (float& x : logits) {
    x = normal(gen);
    if (quantise) x = std::round(x * 4) / 4;
    if (unit(gen) < 0.01f) x = -kInf;
  }
  const int peaks = pick(gen);
  for (int i = 0; i < peaks; ++i) logits[gen() % vocab] += 10 * unit(gen);
  return logits;
}

// Picks of Sampler and NaiveSampler for the same config and logits, observed after each pick.
void expect_same_picks(const SamplingConfig& c, const std::vector<float>& logits, int count,
                       const std::string& what) {
  const int vocab = static_cast<int>(logits.size());
  Sampler fast(c, vocab);
  NaiveSampler slow(c, vocab);
  for (int i = 0; i < count; ++i) {
    const int32_t a = fast.select(logits);
    const int32_t b = slow.select(logits);
    ASSERT_EQ(a, b) << what << " pick " << i << " T " << c.temperature << " top_k " << c.top_k
                    << " top_p " << c.top_p << " mode " << sampler_mode_name(c.mode);
    fast.observe(a);
    slow.observe(b);
  }
}

// Every 25th vector starts with kSeedUniformOne: u equals the whole mass, the fallback path.
void expect_same_picks(const std::vector<SamplingConfig>& settings, int vectors, int vocab,
                       int picks_per_vector, uint64_t data_seed) {
  std::mt19937_64 gen(data_seed);
  for (int v = 0; v < vectors; ++v) {
    const std::vector<float> logits = random_logits(gen, vocab);
    SamplingConfig c = settings[v % settings.size()];
    c.seed = v % 25 == 0 ? kSeedUniformOne : gen();
    expect_same_picks(c, logits, picks_per_vector, "vector " + std::to_string(v));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::vector<SamplingConfig> standard_settings() {
  std::vector<SamplingConfig> s = {
      sampled(1, 0, 1),       sampled(1, 0, 0.9f),     sampled(0.7f, 40, 1),
      sampled(1.3f, 0, 0.5f), sampled(1, 1, 1),        sampled(0.5f, 200, 0.95f),
      sampled(2, 0, 0.999f),  sampled(0.05f, 0, 0.9f), sampled(0, 0, 1)};
  s[1].presence_penalty = 0.5f;
  s[1].frequency_penalty = 0.3f;
  s[2].repetition_penalty = 1.3f;
  s[2].penalty_decay = 0.9f;
  s[3].banned_tokens = {0, 1, 2};
  s[3].logit_bias = {{3, 4.f}, {4, -2.f}};
  return s;
}

std::vector<SamplingConfig> chatrwkv_settings() {
  std::vector<SamplingConfig> s = {chat_mode(1, 0, 0.85f),     chat_mode(1, 0, 0.3f),
                                   chat_mode(0, 0, 0.85f),     chat_mode(0.5f, 0, 1),
                                   chat_mode(2, 0, 0.9f),      chat_mode(1, 40, 1),
                                   chat_mode(1.5f, 10, 0.85f), chat_mode(1, 0, 1),
                                   chat_mode(0.1f, 0, 0.99f),  chat_mode(0.7f, 0, 0.9999f)};
  s[0].presence_penalty = 0.2f;
  s[0].frequency_penalty = 0.2f;
  s[0].penalty_decay = 0.996f;
  s[1].logit_bias = {{0, -1e10f}};
  s[1].presence_penalty = 0.5f;
  s[1].frequency_penalty = 0.5f;
  s[4].banned_tokens = {5, 6, 7};
  return s;
}

TEST(SamplerLazyOrder, StandardMatchesFullStableSort) {
  expect_same_picks(standard_settings(), 2000, 5000, 2, 1);
}

TEST(SamplerLazyOrder, ChatRwkvMatchesFullStableSort) {
  expect_same_picks(chatrwkv_settings(), 2000, 5000, 2, 2);
}

TEST(SamplerLazyOrder, MatchesFullStableSortAtWorldVocabularySize) {
  expect_same_picks(standard_settings(), 36, 65536, 2, 3);
  expect_same_picks(chatrwkv_settings(), 36, 65536, 2, 4);
}

// The draw depends on the tie order: with all-equal logits the k-th id of the order is id k.
TEST(SamplerLazyOrder, TiesGoToTheLowerId) {
  const std::vector<float> flat(1000, 0.f);
  SamplingConfig c = sampled(1, 0, 1, 0);
  SplitMix64 rng(0);
  Sampler s(c, 1000);
  for (int i = 0; i < 50; ++i) {
    const float u = rng.uniform();
    const int32_t id = s.select(flat);
    EXPECT_NEAR(id, u * 1000, 1.0) << i;
  }
}

// Logits built so that the f32 running sum misbehaves in the tail: one dominant id, then many
// ids whose p sits just above or below half an ulp of the sum (spread over a few bins). Biased
// rounding then pushes the sum over 1 long before the end (later ids still count, in the next
// binade) or keeps it from ever reaching a top_p close to 1.
std::vector<float> rounding_trap(int vocab, double tail_p_in_ulps, double spread, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> jitter(-spread, spread);
  std::vector<float> logits(vocab);
  logits[0] = 0;
  const double c = std::log(tail_p_in_ulps * std::ldexp(1.0, -24));
  for (int i = 1; i < vocab; ++i) logits[i] = static_cast<float>(c + jitter(gen));
  return logits;
}

TEST(SamplerLazyOrder, RoundingTrapsInTheTailMatchTheFullSort) {
  const std::vector<SamplingConfig> settings = {sampled(1, 0, 1),
                                                sampled(1, 0, 0.99999994f),
                                                sampled(1, 0, 0.9999f),
                                                sampled(1, 3000, 1),
                                                chat_mode(1, 0, 1),
                                                chat_mode(1, 0, 0.99999994f),
                                                chat_mode(0.5f, 0, 0.9999f),
                                                chat_mode(2, 0, 1),
                                                chat_mode(1, 2500, 1)};
  int case_id = 0;
  for (int vocab : {3000, 9000}) {
    for (double ulps : {0.45, 0.55, 1.45, 1.6, 2.5}) {
      for (double spread : {0.0, 0.05, 0.4}) {
        const std::vector<float> logits = rounding_trap(vocab, ulps, spread, case_id);
        for (const SamplingConfig& setting : settings) {
          for (uint64_t seed : {static_cast<uint64_t>(case_id), kSeedUniformOne}) {
            SamplingConfig c = setting;
            c.seed = seed;
            expect_same_picks(c, logits, 3,
                              "vocab " + std::to_string(vocab) + " ulps " + std::to_string(ulps) +
                                  " spread " + std::to_string(spread));
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
        ++case_id;
      }
    }
  }
}

}  // namespace
}  // namespace wick
