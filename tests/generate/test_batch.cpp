// Batched passes and batch generation (docs/tasks.md §4, P6, P12): every row equals its single
// run, rows never see their neighbours.
#include <gtest/gtest.h>

#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"

namespace wick::test {
namespace {

class Batch : public ::testing::Test {
 protected:
  Model model_ = Model::load_default();
  ByteTokenizer tok_;
  std::vector<std::vector<int32_t>> prompts_ = {tok_.encode("The quick brown fox"),
                                                tok_.encode("A"),
                                                tok_.encode("Once upon a time, in a land far away"),
                                                tok_.encode("The quick brown fox")};
};

TEST_F(Batch, ForwardBatchRowsAreBitIdenticalToSinglePasses) {
  std::vector<State> states(prompts_.size(), model_.new_state());
  std::vector<State*> ptrs;
  for (State& s : states) ptrs.push_back(&s);
  std::vector<std::span<const int32_t>> seqs(prompts_.begin(), prompts_.end());
  const std::vector<float> logits = model_.forward_batch(seqs, ptrs);
  const int V = model_.geometry().vocab;
  for (size_t b = 0; b < prompts_.size(); ++b) {
    State single = model_.new_state();
    const std::vector<float> ref = model_.forward(prompts_[b], single);
    EXPECT_EQ(std::vector<float>(logits.begin() + b * V, logits.begin() + (b + 1) * V), ref) << b;
    EXPECT_TRUE(states[b] == single) << b;
  }
  EXPECT_NE(std::vector<float>(logits.begin(), logits.begin() + V),
            std::vector<float>(logits.begin() + V, logits.begin() + 2 * V));
  // Batched step too.
  const std::vector<int32_t> next = {5, 6, 7, 5};
  const std::vector<float> stepped = model_.step_batch(next, ptrs);
  for (size_t b = 0; b < prompts_.size(); ++b) {
    State single = model_.new_state();
    model_.forward(prompts_[b], single);
    EXPECT_EQ(std::vector<float>(stepped.begin() + b * V, stepped.begin() + (b + 1) * V),
              model_.step(next[b], single));
  }
}

TEST_F(Batch, BadBatchesAreRefusedWithoutTouchingAnyState) {
  std::vector<State> states(2, model_.new_state());
  const std::vector<State> before = states;
  std::vector<State*> ptrs = {&states[0], &states[1]};
  const std::vector<int32_t> ok = {1, 2}, bad = {1, 999};
  std::vector<std::span<const int32_t>> seqs = {ok, bad};
  EXPECT_THROW(model_.forward_batch(seqs, ptrs), InputError);
  std::vector<State*> same = {&states[0], &states[0]};
  seqs = {ok, ok};
  EXPECT_THROW(model_.forward_batch(seqs, same), InputError);
  std::vector<State*> one = {&states[0]};
  EXPECT_THROW(model_.forward_batch(seqs, one), InputError);
  EXPECT_TRUE(states == before);
  GenerationConfig c;
  std::vector<GenerationConfig> two(2);
  std::vector<std::vector<int32_t>> prompts = {{1}, {}, {3}};
  EXPECT_THROW(generate_batch(model_, tok_, prompts, std::span(&c, 1)), InputError);
  prompts = {{1}, {2}, {3}};
  EXPECT_THROW(generate_batch(model_, tok_, prompts, two), InputError);
  EXPECT_THROW(generate_batch(model_, tok_, {}, std::span(&c, 1)), InputError);
}

TEST_F(Batch, GreedyAndSampledRowsEqualSingleGeneration) {
  for (float temperature : {0.f, 1.f}) {
    GenerationConfig c;
    c.max_tokens = 20;
    c.sampling.temperature = temperature;
    c.sampling.top_p = 0.9f;
    c.sampling.seed = 40;
    std::vector<State> states(prompts_.size(), model_.new_state());
    const std::vector<GenerationResult> rows =
        generate_batch(model_, tok_, prompts_, std::span(&c, 1), states);
    ASSERT_EQ(rows.size(), prompts_.size());
    // Without states every row starts from the zero state and none is copied in or out
    // (generate.cpp): the same rows.
    const std::vector<GenerationResult> stateless =
        generate_batch(model_, tok_, prompts_, std::span(&c, 1));
    ASSERT_EQ(stateless.size(), prompts_.size());
    for (size_t r = 0; r < prompts_.size(); ++r) {
      EXPECT_EQ(stateless[r].tokens, rows[r].tokens) << r;
      GenerationConfig single = c;
      single.sampling.seed = c.sampling.seed + r;  // row r samples with seed + r
      State st = model_.new_state();
      const GenerationResult ref = generate_tokens(model_, tok_, prompts_[r], single, st);
      EXPECT_EQ(rows[r].tokens, ref.tokens) << r;
      EXPECT_EQ(rows[r].text, ref.text) << r;
      EXPECT_TRUE(states[r] == st) << r;
    }
    // Rows 0 and 3 share a prompt: equal when greedy, different seeds when sampled.
    if (temperature == 0.f)
      EXPECT_EQ(rows[0].tokens, rows[3].tokens);
    else
      EXPECT_NE(rows[0].tokens, rows[3].tokens);
    EXPECT_NE(rows[0].tokens, rows[2].tokens);
  }
}

TEST_F(Batch, RowsStopAndCancelIndependently) {
  GenerationConfig c;
  c.max_tokens = 24;
  c.sampling.temperature = 1.f;
  c.sampling.seed = 3;
  // Learn row 2's output, then make its 3rd token a stop token only for that row.
  std::vector<GenerationResult> free_run = generate_batch(model_, tok_, prompts_, std::span(&c, 1));
  std::vector<GenerationConfig> per_row;
  for (size_t r = 0; r < prompts_.size(); ++r) {
    per_row.push_back(c);
    per_row.back().sampling.seed = c.sampling.seed + r;
  }
  per_row[2].stop_tokens = {free_run[2].tokens[2]};
  per_row[1].max_tokens = 0;
  std::vector<State> states(prompts_.size(), model_.new_state());
  std::vector<int> calls(prompts_.size(), 0);
  const std::vector<GenerationResult> rows = generate_batch(
      model_, tok_, prompts_, per_row, states,
      [&](size_t row, std::string_view, int32_t) { return !(row == 3 && ++calls[3] == 4); });
  EXPECT_EQ(rows[2].stop_reason, StopReason::kStopToken);
  EXPECT_LE(rows[2].tokens.size(), 3u);
  EXPECT_EQ(rows[1].tokens.size(), 0u);
  EXPECT_EQ(rows[3].stop_reason, StopReason::kCancelled);
  EXPECT_EQ(rows[3].tokens.size(), 4u);
  EXPECT_EQ(rows[0].tokens, free_run[0].tokens);
  // Each row's state is its prompt plus its own tokens, finished rows untouched afterwards.
  for (size_t r = 0; r < prompts_.size(); ++r) {
    State ref = model_.new_state();
    model_.forward(prompts_[r], ref);
    for (int32_t t : rows[r].tokens) model_.step(t, ref);
    EXPECT_TRUE(states[r] == ref) << r;
  }
}

TEST_F(Batch, EachRowStreamsExactlyItsOwnTextWithItsOwnStopStrings) {
  GenerationConfig free_cfg;
  free_cfg.max_tokens = 30;
  const std::vector<GenerationResult> free_run =
      generate_batch(model_, tok_, prompts_, std::span(&free_cfg, 1));
  std::vector<GenerationConfig> per_row(prompts_.size(), free_cfg);
  per_row[0].stop_strings = {free_run[0].text.substr(6, 2)};
  per_row[2].stop_strings = {"\x01\x02 impossible"};  // held tail, released by the final flush
  std::vector<std::string> streamed(prompts_.size());
  const std::vector<GenerationResult> rows = generate_batch(
      model_, tok_, prompts_, per_row, {}, [&](size_t row, std::string_view chunk, int32_t) {
        streamed[row] += chunk;
        return true;
      });
  for (size_t r = 0; r < prompts_.size(); ++r) EXPECT_EQ(streamed[r], rows[r].text) << r;
  EXPECT_EQ(rows[0].stop_reason, StopReason::kStopString);
  EXPECT_EQ(rows[2].stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(rows[2].text, free_run[2].text);
  EXPECT_NE(rows[0].text, free_run[0].text);
}

TEST_F(Batch, RowsContinueFromTheirOwnStates) {
  GenerationConfig c;
  c.max_tokens = 8;
  std::vector<State> states = {model_.new_state(), model_.new_state()};
  model_.forward(tok_.encode("Prefix one. "), states[0]);
  std::vector<State> singles = states;
  std::vector<std::vector<int32_t>> prompts = {tok_.encode("Then"), tok_.encode("Then")};
  const auto rows = generate_batch(model_, tok_, prompts, std::span(&c, 1), states);
  for (size_t r = 0; r < 2; ++r) {
    const GenerationResult ref = generate_tokens(model_, tok_, prompts[r], c, singles[r]);
    EXPECT_EQ(rows[r].tokens, ref.tokens);
    EXPECT_TRUE(states[r] == singles[r]);
  }
  EXPECT_FALSE(states[0] == states[1]);
}

}  // namespace
}  // namespace wick::test
