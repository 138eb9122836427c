// Generation on an RWKV-X model (../shared/fixtures/rwkvx): the KV-cache limit ends a row with
// stop reason "kv_cache_full" after absorbing every token it returned, alike in single-row and
// batch generation.
#include <gtest/gtest.h>

#include "test_util.h"
#include "wick/generate.h"
#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick {
namespace {

TEST(GenerateRwkvX, RowsStopAtTheKvLimitAlikeInSingleAndBatchGeneration) {
  AttentionOptions o;
  o.kv_max = 20;
  const Model m = Model::load(test::fixture("rwkvx/rwkvx-tiny.safetensors")).with_attention(o);
  const auto tokenizer = default_tokenizer_for_vocab(256);
  GenerationConfig cfg;
  cfg.max_tokens = 30;
  const std::vector<std::vector<int32_t>> prompts = {tokenizer->encode("Th"),
                                                     tokenizer->encode("The little")};
  std::vector<GenerationResult> single;
  std::vector<State> single_states;
  for (const auto& p : prompts) {
    State s = m.new_state();
    single.push_back(generate_tokens(m, *tokenizer, p, cfg, s));
    single_states.push_back(s);
    EXPECT_EQ(single.back().stop_reason, StopReason::kKvCacheFull);
    EXPECT_EQ(static_cast<int64_t>(p.size() + single.back().tokens.size()), o.kv_max);
    EXPECT_EQ(s.kv_length(), o.kv_max);  // every returned token was absorbed
  }
  EXPECT_EQ(single[0].tokens.size(), 18u);
  std::vector<State> states(2, m.new_state());
  const std::vector<GenerationResult> batch =
      generate_batch(m, *tokenizer, prompts, std::span<const GenerationConfig>(&cfg, 1), states);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(batch[r].tokens, single[r].tokens) << r;
    EXPECT_EQ(batch[r].stop_reason, StopReason::kKvCacheFull);
    EXPECT_EQ(states[r], single_states[r]);
  }
  EXPECT_NE(single[0].tokens, single[1].tokens);
}

}  // namespace
}  // namespace wick
