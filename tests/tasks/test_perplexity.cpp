// Perplexity (wick/perplexity.h) of the tiny trained model (../shared/fixtures/tiny-rwkv7,
// byte-level) on a fixed English text: parallel windows vs recurrent steps, against a
// straightforward computation written here, determinism, window cutting and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tasks/eval_texts.h"
#include "test_util.h"
#include "wick/perplexity.h"

namespace wick::test {
namespace {

const Model& tiny() {
  static const Model m = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  return m;
}

constexpr int kCtx = 128;

std::vector<int32_t> bytes_of(const std::string& text) {
  return ByteTokenizer().encode(text);
}

// The protocol written out plainly: windows of kCtx bytes from 0, tail dropped; per window one
// parallel pass over all but the last token; a full log-softmax of every row in double.
double straightforward_ppl(const Model& m, const std::string& text, int64_t* scored) {
  const std::vector<int32_t> ids = bytes_of(text);
  const int V = m.geometry().vocab;
  double total = 0;
  int64_t n = 0;
  for (size_t start = 0; start + kCtx <= ids.size(); start += kCtx) {
    const std::vector<int32_t> inputs(ids.begin() + start, ids.begin() + start + kCtx - 1);
    State st = m.new_state();
    const std::vector<float> logits = m.forward(inputs, st, /*all_positions=*/true);
    for (int t = 0; t + 1 < kCtx; ++t) {
      const float* row = logits.data() + static_cast<size_t>(t) * V;
      double mx = row[0];
      for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double s = 0;
      for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
      std::vector<double> log_softmax(V);
      for (int v = 0; v < V; ++v) log_softmax[v] = row[v] - mx - std::log(s);
      total -= log_softmax[ids[start + t + 1]];
      ++n;
    }
  }
  *scored = n;
  return std::exp(total / static_cast<double>(n));
}

TEST(Perplexity, ParallelWindowsAndRecurrentStepsAgree) {
  ByteTokenizer tok;
  const WindowOptions opt{kCtx, 0};
  const PerplexityResult par = perplexity(tiny(), tok, kEnglishText, opt, ScoringPass::kParallel);
  const PerplexityResult rec = perplexity(tiny(), tok, kEnglishText, opt, ScoringPass::kRecurrent);
  std::printf("[parity] tiny-rwkv7 ppl on the English text (ctx %d, %lld tokens): parallel %.9f, "
              "recurrent %.9f\n",
              kCtx, static_cast<long long>(par.tokens_scored), par.ppl, rec.ppl);
  EXPECT_LE(std::abs(par.ppl - rec.ppl), 1e-6 * par.ppl);
  EXPECT_EQ(par.windows, 12);
  EXPECT_EQ(par.tokens_scored, 12 * (kCtx - 1));
  EXPECT_EQ(rec.tokens_scored, par.tokens_scored);
  EXPECT_DOUBLE_EQ(par.ppl, std::exp(par.mean_nll));
  // The tiny trained byte model on English: far better than uniform (256), far from perfect.
  EXPECT_GT(par.ppl, 5.0);
  EXPECT_LT(par.ppl, 64.0);
}

TEST(Perplexity, EqualsAStraightforwardLogSoftmaxComputation) {
  int64_t scored = 0;
  const double want = straightforward_ppl(tiny(), kEnglishText, &scored);
  const PerplexityResult got = perplexity(tiny(), ByteTokenizer(), kEnglishText, {kCtx, 0});
  EXPECT_EQ(got.tokens_scored, scored);
  EXPECT_LE(std::abs(got.ppl - want), 1e-12 * want) << got.ppl << " vs " << want;
}

TEST(Perplexity, DependsOnTheTextAndIsDeterministic) {
  ByteTokenizer tok;
  const PerplexityResult a = perplexity(tiny(), tok, kEnglishText, {kCtx, 0});
  const PerplexityResult b = perplexity(tiny(), tok, kEnglishText, {kCtx, 0});
  EXPECT_EQ(a.ppl, b.ppl);  // bit for bit, not just within 1e-9
  EXPECT_EQ(a.mean_nll, b.mean_nll);
  const PerplexityResult other = perplexity(tiny(), tok, kOtherText, {kCtx, 0});
  EXPECT_GT(std::abs(other.ppl - a.ppl), 1e-3 * a.ppl) << other.ppl << " vs " << a.ppl;
  // The models of the fixture folder in other containers compute the same ppl.
  const Model pth = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"));
  EXPECT_EQ(perplexity(pth, tok, kEnglishText, {kCtx, 0}).ppl, a.ppl);
}

TEST(Perplexity, MaxWindowsKeepsTheFirstWindows) {
  ByteTokenizer tok;
  const std::vector<int32_t> ids = bytes_of(kEnglishText);
  const auto first3 = cut_windows(ids, {kCtx, 3});
  ASSERT_EQ(first3.size(), 3u);
  const PerplexityResult r3 = perplexity(tiny(), tok, kEnglishText, {kCtx, 3});
  EXPECT_EQ(r3.windows, 3);
  EXPECT_EQ(r3.ppl, perplexity(tiny(), first3).ppl);
  // One window is the text's first ctx tokens, nothing else.
  const std::vector<std::vector<int32_t>> one = {std::vector<int32_t>(ids.begin(), ids.begin() + kCtx)};
  EXPECT_EQ(perplexity(tiny(), tok, kEnglishText, {kCtx, 1}).ppl, perplexity(tiny(), one).ppl);
}

TEST(Perplexity, ProgressIsReportedAfterEachWindow) {
  std::vector<std::pair<int64_t, int64_t>> calls;
  perplexity(tiny(), ByteTokenizer(), kEnglishText, {kCtx, 4}, ScoringPass::kParallel,
             [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  const std::vector<std::pair<int64_t, int64_t>> want = {{1, 4}, {2, 4}, {3, 4}, {4, 4}};
  EXPECT_EQ(calls, want);
}

TEST(Perplexity, CutWindowsDropsThePartialTail) {
  std::vector<int32_t> ids(10);
  for (int i = 0; i < 10; ++i) ids[i] = i;
  const auto w = cut_windows(ids, {4, 0});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(w[1], (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(cut_windows(ids, {5, 0}).size(), 2u);
  EXPECT_EQ(cut_windows(ids, {10, 0}).size(), 1u);
  EXPECT_EQ(cut_windows(ids, {2, 3}).size(), 3u);
}

template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Perplexity, TooLittleTextIsAClearError) {
  const std::vector<int32_t> ids(100, 65);
  std::string msg = input_error_of([&] { cut_windows(ids, {512, 0}); });
  EXPECT_NE(msg.find("100 token"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shorter context"), std::string::npos) << msg;
  EXPECT_NE(msg.find("longer text"), std::string::npos) << msg;
  msg = input_error_of([&] { cut_windows(std::vector<int32_t>{}, {512, 0}); });
  EXPECT_NE(msg.find("0 token"), std::string::npos) << msg;
  msg = input_error_of([&] { cut_windows(ids, {1, 0}); });
  EXPECT_NE(msg.find("at least 2"), std::string::npos) << msg;
  msg = input_error_of([&] { cut_windows(ids, {4, -1}); });
  EXPECT_NE(msg.find("max_windows"), std::string::npos) << msg;
  // Pre-cut windows: none, or one of a single token.
  msg = input_error_of([&] { perplexity(tiny(), std::vector<std::vector<int32_t>>{}); });
  EXPECT_NE(msg.find("no window"), std::string::npos) << msg;
  msg = input_error_of([&] { perplexity(tiny(), std::vector<std::vector<int32_t>>{{1, 2}, {3}}); });
  EXPECT_NE(msg.find("window 1 has 1 token"), std::string::npos) << msg;
  // An id outside the vocabulary, also as the last (only predicted, never fed) token.
  for (const std::vector<int32_t>& w : {std::vector<int32_t>{1, 256}, {-1, 2}, {1, 300, 2}}) {
    msg = input_error_of([&] { perplexity(tiny(), std::vector<std::vector<int32_t>>{{1, 2}, w}); });
    EXPECT_NE(msg.find("window 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 256)"), std::string::npos) << msg;
  }
}

TEST(Perplexity, ReadEvaluationTextChecksUtf8AndNamesTheFile) {
  const auto dir = scratch_dir();
  const std::string good = (dir / "good.txt").string();
  write_file(good, "caf\xc3\xa9\n");
  EXPECT_EQ(read_evaluation_text(good), "caf\xc3\xa9\n");
  const std::string bad = (dir / "bad.txt").string();
  write_file(bad, "line one\nline \xff two\n");
  const std::string msg = input_error_of([&] { read_evaluation_text(bad); });
  EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 14"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  const std::string truncated = (dir / "truncated.txt").string();
  write_file(truncated, "abc\xc3");
  EXPECT_NE(input_error_of([&] { read_evaluation_text(truncated); }).find("offset 3"),
            std::string::npos);
  EXPECT_THROW(read_evaluation_text((dir / "missing.txt").string()), FileError);
  EXPECT_THROW(read_evaluation_text(dir.string()), FileError);
}

}  // namespace
}  // namespace wick::test
