// The parallel pass and the recurrent step compute one function: they are checked against each
// other (logits and every layer's state), chunked prefill against one call, and the model against
// an input it must react to.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "model/fixture_case.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/model.h"

namespace wick::test {
namespace {

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::abs(x)));
  return max_abs_diff(a, b) / std::max(scale, 1e-30);
}

class Passes : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = load_fixture_tensors("tiny-rwkv7/seq64.safetensors");
    tokens_ = ints(data_, "tokens");
  }
  Model model_ = Model::load_default();
  io::TensorSet data_;
  std::vector<int32_t> tokens_;
};

TEST_F(Passes, ParallelEqualsRecurrentOnEveryPositionAndState) {
  for (const char* path : {"tiny-rwkv7/tiny-rwkv7-834K.safetensors", "tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors"}) {
    Model m = Model::load(fixture(path));
    const int V = m.geometry().vocab;
    State par = m.new_state(), rec = m.new_state();
    std::vector<float> all = m.forward(tokens_, par, true);
    for (size_t t = 0; t < tokens_.size(); ++t) {
      std::vector<float> step = m.step(tokens_[t], rec);
      std::vector<float> row(all.begin() + t * V, all.begin() + (t + 1) * V);
      EXPECT_LE(max_rel_diff(step, row), 1e-5) << path << " position " << t;
      EXPECT_EQ(argmax(step), argmax(row)) << path << " position " << t;
      // By construction (one dot kernel, one WKV kernel) the two are bit-identical.
      EXPECT_EQ(step, row) << path << " position " << t;
    }
    const StateDiff d = diff(split_state(par), split_state(rec));
    EXPECT_LE(d.max(), 1e-5) << path;
    EXPECT_TRUE(par == rec) << path;
  }
}

TEST_F(Passes, PromptSplitInTwoChunksAtEveryPositionMatchesOneCall) {
  State whole = model_.new_state();
  const std::vector<float> one = model_.forward(tokens_, whole, true);
  const int V = model_.geometry().vocab;
  for (size_t split = 1; split < tokens_.size(); ++split) {
    State st = model_.new_state();
    std::span<const int32_t> all(tokens_);
    std::vector<float> a = model_.forward(all.subspan(0, split), st, true);
    std::vector<float> b = model_.forward(all.subspan(split), st, true);
    a.insert(a.end(), b.begin(), b.end());
    ASSERT_EQ(a.size(), one.size());
    EXPECT_LE(max_abs_diff(a, one), 1e-6) << "split at " << split;
    EXPECT_LE(diff(split_state(st), split_state(whole)).max(), 1e-6) << "split at " << split;
    (void)V;
  }
}

TEST_F(Passes, LastPositionLogitsEqualLastRowOfAllPositions) {
  State a = model_.new_state(), b = model_.new_state();
  std::vector<float> all = model_.forward(tokens_, a, true);
  std::vector<float> last = model_.forward(tokens_, b, false);
  const int V = model_.geometry().vocab;
  ASSERT_EQ(last.size(), static_cast<size_t>(V));
  EXPECT_EQ(last, std::vector<float>(all.end() - V, all.end()));
  EXPECT_TRUE(a == b);
}

TEST_F(Passes, DifferentPromptGivesDifferentLogitsAndState) {
  State a = model_.new_state(), b = model_.new_state();
  std::vector<int32_t> other = tokens_;
  other[10] = (other[10] + 1) % 256;  // one byte changed in the middle
  const int V = model_.geometry().vocab;
  std::vector<float> la = model_.forward(tokens_, a, true);
  std::vector<float> lb = model_.forward(other, b, true);
  // Identical before the change, different from it on (strongly at the changed position, still
  // measurably at the end: this weak model forgets fast).
  EXPECT_EQ(std::vector<float>(la.begin(), la.begin() + 10 * V),
            std::vector<float>(lb.begin(), lb.begin() + 10 * V));
  EXPECT_GT(max_abs_diff(la.data() + 10 * V, lb.data() + 10 * V, V), 1e-2);
  EXPECT_GT(max_abs_diff(la.data() + 63 * V, lb.data() + 63 * V, V), 1e-4);
  EXPECT_GT(diff(split_state(a), split_state(b)).wkv, 1e-3);
  // And the state carries context: the same token after different histories differs.
  State c = model_.new_state(), d = model_.new_state();
  model_.forward(std::vector<int32_t>{65, 66}, c);
  model_.forward(std::vector<int32_t>{90, 66}, d);
  EXPECT_GT(max_abs_diff(model_.step(32, c), model_.step(32, d)), 1e-4);
}

TEST_F(Passes, ConcurrentCallersOnOneModelGetTheSameBits) {
  // model.h promises that threads may call forward()/step() at once, each with its own State.
  State s0 = model_.new_state();
  const std::vector<float> want = model_.forward(tokens_, s0, true);
  std::vector<std::vector<float>> got(4);
  std::vector<State> states(4, model_.new_state());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) {
        states[i].reset();
        got[i] = model_.forward(tokens_, states[i], true);
      }
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i], want) << i;
    EXPECT_EQ(states[i], s0) << i;
  }
}

TEST_F(Passes, StateIsAValueSnapshotRestoreContinuesIdentically) {
  State st = model_.new_state();
  model_.forward(std::span<const int32_t>(tokens_).subspan(0, 20), st);
  State snapshot = st;
  std::vector<float> cont1 = model_.forward(std::span<const int32_t>(tokens_).subspan(20), st);
  State restored = snapshot;
  std::vector<float> cont2 = model_.forward(std::span<const int32_t>(tokens_).subspan(20), restored);
  EXPECT_EQ(cont1, cont2);
  EXPECT_TRUE(st == restored);
  EXPECT_FALSE(st == snapshot);
  st.reset();
  EXPECT_TRUE(st == model_.new_state());
}

TEST_F(Passes, BadInputsThrowAndLeaveTheStateUnchanged) {
  State st = model_.new_state();
  model_.forward(std::vector<int32_t>{1, 2, 3}, st);
  const State before = st;
  EXPECT_THROW(model_.forward(std::vector<int32_t>{}, st), InputError);
  EXPECT_THROW(model_.forward(std::vector<int32_t>{1, 256}, st), InputError);
  EXPECT_THROW(model_.step(-1, st), InputError);
  try {
    model_.step(300, st);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("300"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos);
  }
  EXPECT_TRUE(st == before);
  State wrong(3, 64, 1, 64);
  EXPECT_THROW(model_.step(1, wrong), InputError);
  Model h4 = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors"));
  EXPECT_THROW(h4.step(1, st), InputError);  // H=1 state into an H=4 model
}

TEST_F(Passes, GenerateContinuesFromTheCallersStateAndAbsorbsEveryToken) {
  ByteTokenizer tok;
  State st = model_.new_state();
  GenerationConfig cfg;
  cfg.max_tokens = 8;
  GenerationResult r = generate_tokens(model_, tok, tokens_, cfg, st);
  ASSERT_EQ(r.tokens.size(), 8u);
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r.prompt_tokens, 64);
  // The state equals one pass over prompt + generated tokens.
  std::vector<int32_t> all = tokens_;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  State ref = model_.new_state();
  model_.forward(all, ref);
  EXPECT_LE(diff(split_state(st), split_state(ref)).max(), 1e-6);
  // Stop token: ends right after producing it.
  State st2 = model_.new_state();
  cfg.stop_tokens = {r.tokens[2]};
  GenerationResult s = generate_tokens(model_, tok, tokens_, cfg, st2);
  EXPECT_EQ(s.stop_reason, StopReason::kStopToken);
  EXPECT_EQ(s.tokens.back(), r.tokens[2]);
  // Cancel from the callback.
  State st3 = model_.new_state();
  cfg.stop_tokens.clear();
  int calls = 0;
  GenerationResult c = generate_tokens(model_, tok, tokens_, cfg, st3,
                                       [&](std::string_view, int32_t) { return ++calls < 3; });
  EXPECT_EQ(c.stop_reason, StopReason::kCancelled);
  EXPECT_EQ(c.tokens.size(), 3u);
}

}  // namespace
}  // namespace wick::test
