// Speculative decoding in the serving engine (wick/engine.h): a speculating request verifies its
// draft inside the batched pass next to plain and prefilling rows and still equals its solo plain
// run; the prefix cache keeps only states of decided tokens; the engine counts drafts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_test_helpers.h"
#include "test_util.h"
#include "wick/engine.h"
#include "wick/generate.h"

namespace wick::test {
namespace {

const Model& tiny() {
  static const Model m = Model::load_default();
  return m;
}

Solo run_plain(const std::vector<int32_t>& prompt, GenerationConfig c) {
  ByteTokenizer tok;
  c.speculative.n_max = 0;
  return run_solo(tiny(), tok, prompt, c);
}

RequestHandle submit(Engine& e, std::vector<int32_t> prompt, const GenerationConfig& c,
                     std::string* streamed) {
  return submit_streamed(e, std::move(prompt), c, streamed);
}

void expect_same(const Solo& solo, const EngineResult& got, const std::string& streamed,
                 const std::string& what) {
  EXPECT_EQ(got.tokens, solo.result.tokens) << what;
  EXPECT_EQ(got.text, solo.result.text) << what;
  EXPECT_EQ(got.stop_reason, solo.result.stop_reason) << what;
  EXPECT_EQ(streamed, solo.streamed) << what;
  EXPECT_TRUE(got.state == solo.state) << what;
  EXPECT_EQ(got.continuation.logits, solo.result.continuation.logits) << what;
}

GenerationConfig config(uint64_t seed, int n, bool sampled, int k) {
  GenerationConfig c = generation_config(seed, n, sampled, 0.7f);
  c.speculative.n_max = k;
  return c;
}

TEST(EngineSpeculative, SpeculatingRowsAmongPlainAndPrefillingRowsEqualSoloPlainRuns) {
  ByteTokenizer tok;
  // Repetitive prompts (drafts found at once) and a long one still prefilling in small chunks
  // while the others decode (the iteration then splits into a decode and a prefill pass).
  std::string long_prompt;
  for (int i = 0; i < 12; ++i) long_prompt += "Line " + std::to_string(i) + " of a long text. ";
  struct Case {
    std::vector<int32_t> prompt;
    GenerationConfig config;
    Solo solo;
  };
  std::vector<Case> cases = {
      {tok.encode("Once upon a time, there was a girl. Once upon a time"),
       config(1, 80, false, 8), {}},
      {tok.encode("The dog ran. The dog ran. The dog"), config(2, 60, true, 4), {}},
      {tok.encode("Hello there"), config(3, 50, true, 0), {}},
      {tok.encode(long_prompt), config(4, 40, false, 6), {}},
      {tok.encode("Once upon a time"), config(5, 70, false, 0), {}},
      {tok.encode("abcabcabcabc"), config(6, 30, true, 64), {}},
  };
  cases[1].config.stop_strings = {"ran. The"};
  for (Case& c : cases) c.solo = run_plain(c.prompt, c.config);
  for (int chunk : {3, 1000}) {
    EngineOptions o;
    o.max_rows = 4;
    o.prefill_chunk = chunk;
    o.prefill_chunk_idle = std::max(chunk, 16);
    o.itl_ratio = 0;
    o.cache_bytes = 0;
    Engine engine(tiny(), tok, o);
    std::vector<RequestHandle> handles;
    std::vector<std::string> streamed(cases.size());
    for (size_t i = 0; i < cases.size(); ++i)
      handles.push_back(submit(engine, cases[i].prompt, cases[i].config, &streamed[i]));
    int accepted = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const EngineResult& r = handles[i].wait();
      expect_same(cases[i].solo, r, streamed[i],
                  "request " + std::to_string(i) + " chunk " + std::to_string(chunk));
      if (cases[i].config.speculative.enabled()) {
        EXPECT_GT(r.speculative.passes, 0);
        accepted += r.speculative.accepted;
      } else {
        EXPECT_EQ(r.speculative.drafted, 0);
      }
    }
    EXPECT_GT(accepted, 0);
    const EngineStats st = engine.stats();
    EXPECT_GT(st.spec_drafted, 0u);
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_LE(st.spec_accepted, st.spec_drafted);
  }
  // A different prompt gives a different result (the comparisons above can fail).
  EXPECT_NE(cases[0].solo.result.tokens, cases[4].solo.result.tokens);
}

TEST(EngineSpeculative, CachedStatesAreThoseOfPlainDecoding) {
  ByteTokenizer tok;
  const std::vector<int32_t> prompt = tok.encode("Once upon a time, there was a girl. Once");
  const GenerationConfig spec = config(9, 50, true, 8);
  EngineOptions o;
  o.max_rows = 2;
  Engine engine(tiny(), tok, o);
  std::string s1, s2, s3;
  const EngineResult first = submit(engine, prompt, spec, &s1).wait();
  const Solo solo = run_plain(prompt, spec);
  expect_same(solo, first, s1, "first");
  // The same request again starts from the cached whole prompt.
  const EngineResult again = submit(engine, prompt, spec, &s2).wait();
  EXPECT_EQ(again.cached_tokens, static_cast<int>(prompt.size()));
  expect_same(solo, again, s2, "cached");
  // A follow-up that sends prompt + reply starts from the state stored at the end of the
  // speculative run: it must equal a plain run over the whole sequence from zero.
  std::vector<int32_t> follow = prompt;
  follow.insert(follow.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> more = tok.encode(" The end.");
  follow.insert(follow.end(), more.begin(), more.end());
  const GenerationConfig plain = config(10, 30, true, 0);
  const EngineResult next = submit(engine, follow, plain, &s3).wait();
  EXPECT_EQ(next.cached_tokens, static_cast<int>(prompt.size() + first.tokens.size()));
  expect_same(run_plain(follow, plain), next, s3, "follow-up");
}

}  // namespace
}  // namespace wick::test
