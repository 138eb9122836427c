// n-gram speculative decoding (docs/serving.md §7, wick/generate.h SpeculativeConfig): the
// drafter's lookup rule, and generation with speculation identical to plain decoding - tokens,
// text, stream chunks, log-probabilities, stop reasons, final state and continuation - greedy and
// seeded, on the tiny byte-level model and on a World-vocabulary synthetic model.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "generate/ngram_drafter.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

// ---- The drafter ------------------------------------------------------------------------------

// The rule written out directly: for n from 8 down to 2, the latest earlier end position e of the
// last n tokens, then history[e + 1 .. e + k] cut at the end of the history.
std::vector<int32_t> reference_draft(const std::vector<int32_t>& h, int k) {
  const int64_t last = static_cast<int64_t>(h.size()) - 1;
  for (int n = 8; n >= 2; --n) {
    if (last + 1 < n + 1) continue;
    for (int64_t e = last - 1; e >= n - 1; --e) {
      bool same = true;
      for (int i = 0; i < n && same; ++i) same = h[e - i] == h[last - i];
      if (!same) continue;
      std::vector<int32_t> out;
      for (int64_t p = e + 1; p <= last && p <= e + k; ++p) out.push_back(h[p]);
      return out;
    }
  }
  return {};
}

TEST(NgramDrafter, LatestMatchLongestSuffixAtMostK) {
  gen::NgramDrafter d;
  std::vector<int32_t> out;
  EXPECT_EQ(d.draft(4, out), 0);
  d.push(std::vector<int32_t>{1, 2, 3, 9, 9, 1, 2, 4, 5, 6, 7, 1, 2});
  // Suffix "1 2" occurred at 0..1 and 5..6: the latest (5..6) is followed by 4 5 6 7 1 2.
  EXPECT_EQ(d.draft(3, out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(d.draft(64, out), 2);  // never past the end of the history
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6, 7, 1, 2}));
  EXPECT_EQ(d.draft(0, out), 0);
  EXPECT_TRUE(out.empty());
  // A longer suffix wins over a later shorter one: "3 1 2" occurs at 2..4 only with n = 3.
  gen::NgramDrafter e;
  e.push(std::vector<int32_t>{3, 1, 2, 8, 8, 1, 2, 7, 7, 3, 1, 2});
  EXPECT_EQ(e.draft(2, out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{8, 8}));
  // No suffix of length >= 2 recurs: no draft (a single repeated token is not enough).
  gen::NgramDrafter f;
  f.push(std::vector<int32_t>{5, 6, 7, 5, 8});
  EXPECT_EQ(f.draft(4, out), 0);
  EXPECT_TRUE(out.empty());
  // Eight tokens are the longest suffix looked up (a match of 9 is found as one of 8).
  gen::NgramDrafter g;
  const std::vector<int32_t> nine = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  g.push(nine);
  g.push(40);
  g.push(nine);
  EXPECT_EQ(g.draft(1, out), 8);
  EXPECT_EQ(out, (std::vector<int32_t>{40}));
  // min_n: only suffixes of at least that many tokens draft (the back-off's rule).
  EXPECT_EQ(e.draft(2, out, 3), 3);
  EXPECT_EQ(e.draft(2, out, 4), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(d.draft(3, out, 1), 2);  // below kMinN counts as kMinN
  EXPECT_EQ(d.draft(3, out, 3), 0);
  EXPECT_EQ(g.draft(1, out, 8), 8);
}

TEST(NgramDrafter, LongHistoriesStayExact) {
  // The table grows (rehashes) many times over a long history; drafts still follow the rule.
  std::mt19937 rng(9);
  gen::NgramDrafter d;
  std::vector<int32_t> h, out;
  for (int i = 0; i < 20000; ++i) {
    const int32_t t = static_cast<int32_t>(rng() % 5u);
    d.push(t);
    h.push_back(t);
    if (i % 97 == 0 || i == 19999) {  // across every rehash
      d.draft(6, out);
      ASSERT_EQ(out, reference_draft(h, 6)) << "after " << i + 1 << " tokens";
    }
  }
  EXPECT_FALSE(out.empty());
}

TEST(NgramDrafter, IncrementalIndexEqualsTheDirectRuleOnRandomText) {
  std::mt19937 rng(5);
  for (int alphabet : {2, 3, 6, 40}) {
    gen::NgramDrafter d;
    std::vector<int32_t> h;
    std::vector<int32_t> out;
    int drafts = 0;
    for (int i = 0; i < 600; ++i) {
      const int32_t t = static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet));
      d.push(t);
      h.push_back(t);
      const int k = 1 + static_cast<int>(rng() % 10);
      d.draft(k, out);
      ASSERT_EQ(out, reference_draft(h, k)) << "alphabet " << alphabet << " at " << i;
      drafts += !out.empty();
    }
    EXPECT_GT(drafts, 0);
  }
  // The reference can disagree (the comparison can fail): another history, another draft.
  EXPECT_NE(reference_draft({1, 2, 3, 1, 2}, 4), reference_draft({1, 2, 4, 1, 2}, 4));
}

// ---- Generation ---------------------------------------------------------------------------------

const Model& tiny() {
  static const Model m = Model::load_default();
  return m;
}

const Model& world_model() {
  static const Model m = synthetic_model("2:128", DType::F32, 7);
  return m;
}

const Tokenizer& world_tok() {
  static const std::unique_ptr<Tokenizer> t = default_world_tokenizer();
  return *t;
}

struct SpecRun {
  GenerationResult r;
  std::vector<std::pair<std::string, int32_t>> chunks;
  State state;
};

SpecRun run(const Model& m, const Tokenizer& tok, const std::string& prompt, GenerationConfig c,
        int k) {
  c.speculative.n_max = k;
  SpecRun out;
  out.state = m.new_state();
  out.r = generate(m, tok, prompt, c, out.state, [&](std::string_view chunk, int32_t id) {
    out.chunks.emplace_back(std::string(chunk), id);
    return true;
  });
  return out;
}

void expect_identical(const SpecRun& plain, const SpecRun& spec, const std::string& what) {
  EXPECT_EQ(spec.r.tokens, plain.r.tokens) << what;
  EXPECT_EQ(spec.r.text, plain.r.text) << what;
  EXPECT_EQ(spec.r.stop_reason, plain.r.stop_reason) << what;
  EXPECT_EQ(spec.r.stop_token, plain.r.stop_token) << what;
  EXPECT_EQ(spec.r.stop_string, plain.r.stop_string) << what;
  EXPECT_EQ(spec.chunks, plain.chunks) << what;
  EXPECT_TRUE(spec.state == plain.state) << what;
  EXPECT_EQ(spec.r.timings.decode_steps, plain.r.timings.decode_steps) << what;
  EXPECT_EQ(spec.r.continuation.logits, plain.r.continuation.logits) << what;
  EXPECT_EQ(spec.r.continuation.sampler, plain.r.continuation.sampler) << what;
  ASSERT_EQ(spec.r.logprobs.size(), plain.r.logprobs.size()) << what;
  for (size_t i = 0; i < plain.r.logprobs.size(); ++i) {
    EXPECT_EQ(spec.r.logprobs[i].token, plain.r.logprobs[i].token) << what;
    EXPECT_EQ(spec.r.logprobs[i].logprob, plain.r.logprobs[i].logprob) << what;
    EXPECT_EQ(spec.r.logprobs[i].top, plain.r.logprobs[i].top) << what;
  }
  EXPECT_EQ(plain.r.speculative.passes, 0) << "counters stay 0 with speculation off";
  EXPECT_LE(spec.r.speculative.accepted, spec.r.speculative.drafted) << what;
  // Every token came from a pass: at most one pick per pass beyond the accepted draft tokens.
  EXPECT_GE(spec.r.speculative.passes + spec.r.speculative.accepted, spec.r.generated_tokens)
      << what;
}

GenerationConfig greedy(int n) {
  GenerationConfig c;
  c.max_tokens = n;
  c.logprobs = 3;
  return c;
}

GenerationConfig seeded(uint64_t seed, int n) {
  GenerationConfig c = greedy(n);
  c.sampling.temperature = 0.8f;
  c.sampling.top_p = 0.9f;
  c.sampling.presence_penalty = 0.2f;
  c.sampling.frequency_penalty = 0.1f;
  c.sampling.penalty_decay = 0.99f;
  c.sampling.seed = seed;
  return c;
}

TEST(Speculative, TinyModelGreedyIdenticalAndDraftsAccepted) {
  ByteTokenizer tok;
  const std::string prompt = "Once upon a time, there was a little girl. Once upon a time";
  const SpecRun plain = run(tiny(), tok, prompt, greedy(160), 0);
  int accepted = 0;
  for (int k : {1, 2, 4, 8, 64}) {
    const SpecRun spec = run(tiny(), tok, prompt, greedy(160), k);
    expect_identical(plain, spec, "k " + std::to_string(k));
    EXPECT_GT(spec.r.speculative.drafted, 0) << k;
    EXPECT_LE(spec.r.speculative.drafted, k * spec.r.speculative.passes) << k;
    accepted += spec.r.speculative.accepted;
    if (k >= 4) EXPECT_LT(spec.r.speculative.passes, plain.r.generated_tokens) << k;
  }
  // The tiny model repeats itself greedily: drafts from its own output are accepted.
  EXPECT_GT(accepted, 0);
}

TEST(Speculative, NonRepetitiveTextDraftsLittle) {
  // The back-off (docs/serving.md §7): after a miss only a longer recurring suffix drafts, and a
  // short suffix drafts few tokens. Sampled text from the tiny model seldom repeats 4+ bytes, so
  // three 512-token runs verify a handful of draft tokens (5 on the machine this was written on;
  // without the two rules about 60, and without the suffix rule alone about 24).
  ByteTokenizer tok;
  int drafted = 0, accepted = 0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    GenerationConfig c;
    c.max_tokens = 512;
    c.stop_tokens.clear();
    c.sampling.temperature = 1.f;
    c.sampling.top_p = 0.9f;
    c.sampling.seed = seed;
    const SpecRun spec = run(tiny(), tok, "Once upon a time", c, 8);
    EXPECT_EQ(spec.r.generated_tokens, 512);
    drafted += spec.r.speculative.drafted;
    accepted += spec.r.speculative.accepted;
  }
  EXPECT_LE(drafted, 15);
  EXPECT_LE(accepted, drafted);
}

TEST(Speculative, TinyModelSeededPenaltiesStopsAndLimitsIdentical) {
  ByteTokenizer tok;
  const std::string prompt = "The cat sat on the mat. The cat sat on the";
  for (uint64_t seed : {1u, 2u, 3u}) {
    for (int n : {1, 2, 7, 90}) {
      GenerationConfig c = seeded(seed, n);
      const SpecRun plain = run(tiny(), tok, prompt, c, 0);
      for (int k : {1, 5, 16}) {
        const SpecRun spec = run(tiny(), tok, prompt, c, k);
        expect_identical(plain, spec, "seed " + std::to_string(seed) + " n " +
                                          std::to_string(n) + " k " + std::to_string(k));
      }
    }
    // Stop strings and stop tokens taken from the plain run's own output, so they do stop it; the
    // ChatRWKV sampler mode (its own penalty rules) too.
    GenerationConfig c = seeded(seed, 120);
    const SpecRun free_run = run(tiny(), tok, prompt, c, 0);
    ASSERT_GE(free_run.r.text.size(), 40u);
    GenerationConfig with_stop = c;
    const std::string raw = tok.decode(free_run.r.tokens);  // the bytes, before any U+FFFD
    with_stop.stop_strings = {raw.substr(30, 3), "\xff\xfe"};
    GenerationConfig with_token = c;
    with_token.stop_tokens = {free_run.r.tokens[25]};
    GenerationConfig chat = c;
    chat.sampling = SamplingConfig::chatrwkv_pipeline();
    chat.sampling.seed = seed;
    chat.penalize_prompt = true;
    for (const GenerationConfig& cc : {with_stop, with_token, chat}) {
      const SpecRun plain = run(tiny(), tok, prompt, cc, 0);
      for (int k : {2, 8}) expect_identical(plain, run(tiny(), tok, prompt, cc, k), "stops");
    }
    EXPECT_EQ(run(tiny(), tok, prompt, with_stop, 4).r.stop_reason, StopReason::kStopString);
    EXPECT_EQ(run(tiny(), tok, prompt, with_token, 4).r.stop_reason, StopReason::kStopToken);
  }
  // Another seed gives another output (the equalities above can fail).
  const SpecRun a = run(tiny(), tok, prompt, seeded(1, 60), 8);
  const SpecRun b = run(tiny(), tok, prompt, seeded(2, 60), 8);
  EXPECT_NE(a.r.tokens, b.r.tokens);
  EXPECT_FALSE(a.state == b.state);
}

TEST(Speculative, WorldModelGreedyAndSeededIdentical) {
  // A document followed by a request to repeat it: the prompt itself gives drafts.
  const std::string doc =
      "Рецепт борща: свёкла, капуста, картофель. The quick brown fox jumps over the lazy dog. "
      "日本語のテキスト 🚀 ";
  const std::string prompt = doc + "\nRepeat the document.\n" + doc;
  // The random weights do not repeat the document; a bias on the ids of " lazy dog" makes the
  // output repeat them (greedy) or mix them (sampled), so drafts are found and verified.
  const std::vector<int32_t> biased = world_tok().encode(" lazy dog");
  int drafted = 0;
  for (int variant = 0; variant < 4; ++variant) {
    const bool sampled = variant % 2 == 1;
    GenerationConfig c = sampled ? seeded(11, 48) : greedy(48);
    c.stop_strings = {"lazy cat"};
    if (variant >= 2)
      for (int32_t id : biased) c.sampling.logit_bias.emplace_back(id, 12.f);
    const SpecRun plain = run(world_model(), world_tok(), prompt, c, 0);
    for (int k : {3, 8}) {
      const SpecRun spec = run(world_model(), world_tok(), prompt, c, k);
      expect_identical(plain, spec, std::string(sampled ? "sampled" : "greedy") + " k " +
                                        std::to_string(k));
      drafted += spec.r.speculative.drafted;
    }
  }
  EXPECT_GT(drafted, 0);
}

TEST(Speculative, ContinuingFromASpeculativeRunEqualsAnUninterruptedOne) {
  ByteTokenizer tok;
  const GenerationConfig c = seeded(5, 40);
  SpecRun first = run(tiny(), tok, "Once upon a time", c, 6);
  GenerationConfig more = c;
  more.speculative.n_max = 6;
  const GenerationResult second =
      generate(tiny(), tok, "", more, first.state, first.r.continuation);
  GenerationConfig whole = c;
  whole.max_tokens = 80;
  const SpecRun once = run(tiny(), tok, "Once upon a time", whole, 0);
  std::vector<int32_t> joined = first.r.tokens;
  joined.insert(joined.end(), second.tokens.begin(), second.tokens.end());
  EXPECT_EQ(joined, once.r.tokens);
  EXPECT_TRUE(first.state == once.state);
}

TEST(Speculative, DraftLengthIsValidated) {
  GenerationConfig c;
  c.speculative.n_max = SpeculativeConfig::kMaxDraft;
  EXPECT_NO_THROW(c.validate(256));
  for (int bad : {-1, SpeculativeConfig::kMaxDraft + 1}) {
    c.speculative.n_max = bad;
    EXPECT_THROW(c.validate(256), InputError) << bad;
  }
  ByteTokenizer tok;
  EXPECT_THROW(generate(tiny(), tok, "hi", c), InputError);
}

}  // namespace
}  // namespace wick::test
