// Generation on a model with the World vocabulary (docs/tasks.md §9 G13, G14, G17, P12): a small
// deterministic synthetic checkpoint (wick synth, L 2, C 128, V 65536) with the embedded World
// tokenizer, so multi-byte tokens, held-back tails and batch rows are exercised end to end.
#include <gtest/gtest.h>

#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

const Model& world_model() {
  static const Model m = synthetic_model("2:128", DType::F32, 7);
  return m;
}

GenerationConfig sampled(uint64_t seed, int n) {
  GenerationConfig c;
  c.max_tokens = n;
  c.sampling.temperature = 1.f;
  c.sampling.top_p = 0.9f;
  c.sampling.seed = seed;
  return c;
}

std::string stream_of(const Model& m, const Tokenizer& tok, const std::string& prompt,
                      const GenerationConfig& c, GenerationResult* out) {
  std::string streamed;
  State st = m.new_state();
  *out = generate(m, tok, prompt, c, st, [&](std::string_view chunk, int32_t) {
    EXPECT_EQ(utf8_replace_invalid(chunk), chunk);  // every chunk is whole UTF-8
    streamed += chunk;
    return true;
  });
  return streamed;
}

TEST(GenerateWorld, CyrillicPromptStreamsExactlyTheText) {
  auto tok = default_world_tokenizer();
  for (uint64_t seed : {1u, 2u, 3u}) {
    GenerationResult r;
    const std::string streamed =
        stream_of(world_model(), *tok, "Рецепт борща начинается с", sampled(seed, 24), &r);
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.tokens.size(), 24u);
    EXPECT_FALSE(r.text.empty());
  }
}

TEST(GenerateWorld, ImpossibleStopStringHoldsTheTailAndFlushesIt) {
  auto tok = default_world_tokenizer();
  GenerationConfig c = sampled(5, 32);
  GenerationResult plain;
  stream_of(world_model(), *tok, "Once upon a time", c, &plain);
  c.stop_strings = {"\xE2\x98\x83 never \xE2\x98\x83"};
  GenerationResult r;
  const std::string streamed = stream_of(world_model(), *tok, "Once upon a time", c, &r);
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r.tokens, plain.tokens);
  EXPECT_EQ(streamed, r.text);
}

TEST(GenerateWorld, ContinuingAndBatchRowsEqualSingleRuns) {
  const Model& m = world_model();
  auto tok = default_world_tokenizer();
  const std::vector<int32_t> A = tok->encode("The quick brown fox "), B = tok->encode("jumps");
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  GenerationConfig c;
  c.max_tokens = 12;
  State s = m.new_state();
  m.forward(A, s);
  const GenerationResult cont = generate_tokens(m, *tok, B, c, s);
  State fresh = m.new_state();
  const GenerationResult whole = generate_tokens(m, *tok, AB, c, fresh);
  EXPECT_EQ(cont.tokens, whole.tokens);
  State zero = m.new_state();
  EXPECT_NE(generate_tokens(m, *tok, B, c, zero).tokens, cont.tokens);
  // Batch rows (greedy and sampled) equal single runs.
  const std::vector<std::vector<int32_t>> prompts = {A, B, AB};
  for (const GenerationConfig& cfg : {c, sampled(9, 12)}) {
    const auto rows = generate_batch(m, *tok, prompts, std::span(&cfg, 1));
    for (size_t r = 0; r < prompts.size(); ++r) {
      GenerationConfig single = cfg;
      single.sampling.seed = cfg.sampling.seed + r;
      State st = m.new_state();
      EXPECT_EQ(rows[r].tokens, generate_tokens(m, *tok, prompts[r], single, st).tokens) << r;
    }
  }
}

// A generated id the tokenizer lacks used to vanish from the text (token_bytes gave ""); now it
// is an error that names the id. The byte-level tokenizer on the World model: the first id >= 256.
TEST(GenerateWorld, AnIdTheTokenizerLacksIsAnErrorNamingIt) {
  const ByteTokenizer bytes;
  const GenerationConfig c = sampled(4, 32);
  State st = world_model().new_state();
  std::vector<int32_t> seen;
  try {
    generate(world_model(), bytes, "hi", c, st, [&](std::string_view, int32_t id) {
      seen.push_back(id);
      return true;
    });
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the model generated token id "), std::string::npos) << m;
    EXPECT_NE(m.find("byte-level tokenizer (ids 0..255)"), std::string::npos) << m;
    for (int32_t id : seen) EXPECT_LT(id, 256);  // every streamed id decoded
  }
}

}  // namespace
}  // namespace wick::test
