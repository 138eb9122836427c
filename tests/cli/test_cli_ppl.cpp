// `wick ppl` and `wick kl` as users run them: the JSON fields, agreement with the library, the
// errors for a too-short or non-UTF-8 text (naming the file, exit status 1, nothing on stdout),
// and no progress bar when stderr is not a terminal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tasks/eval_texts.h"
#include "test_util.h"
#include "wick/perplexity.h"

namespace wick::test {
namespace {

// A file in this test's scratch folder (scratch_dir() empties the folder, so call it once).
std::string text_file(const std::filesystem::path& dir, const std::string& name,
                      const std::string& bytes) {
  const std::string path = (dir / name).string();
  write_file(path, bytes);
  return path;
}

TEST(CliPpl, JsonHasTheResultFieldsAndMatchesTheLibrary) {
  const std::string text = text_file(scratch_dir(), "english.txt", kEnglishText);
  const std::string model = fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors");
  CliRun r = run_wick("ppl --model " + shell_quote(model) + " --text " + shell_quote(text) +
                      " --ctx 128 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress bar and no chatter when stderr is not a terminal
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokens_scored"], 12 * 127);
  EXPECT_EQ(j["windows"], 12);
  EXPECT_EQ(j["ctx"], 128);
  EXPECT_EQ(j["text_tokens"], 1569);
  EXPECT_EQ(j["unused_tokens"], 33);
  EXPECT_EQ(j["model"], model);
  EXPECT_EQ(j["tokenizer"], "byte-level");
  const double ppl = j["ppl"], mean_nll = j["mean_nll"];
  EXPECT_DOUBLE_EQ(ppl, std::exp(mean_nll));
  const PerplexityResult lib =
      perplexity(Model::load(model), ByteTokenizer(), kEnglishText, {128, 0});
  EXPECT_EQ(ppl, lib.ppl);  // JSON doubles read back exactly
  EXPECT_EQ(mean_nll, lib.mean_nll);
  // --max-windows and --recurrent; the embedded default model is the same tiny model.
  r = run_wick("ppl --text " + shell_quote(text) + " --ctx 128 --max-windows 2 --recurrent --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json k = nlohmann::json::parse(r.out);
  EXPECT_EQ(k["windows"], 2);
  EXPECT_EQ(k["tokens_scored"], 2 * 127);
  EXPECT_EQ(k["unused_tokens"], 1569 - 2 * 128);
  EXPECT_EQ(k["pass"], "recurrent");
}

TEST(CliPpl, TextOutputIsOneLine) {
  const std::string text = text_file(scratch_dir(), "english.txt", kEnglishText);
  CliRun r = run_wick("ppl --text " + shell_quote(text) + " --ctx 256");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ppl ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("1530 tokens in 6 windows of 256"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST(CliPpl, TooShortOrInvalidTextIsAnInputError) {
  const auto dir = scratch_dir();
  const std::string text = text_file(dir, "short.txt", "Only a few words.");
  CliRun r = run_wick("ppl --text " + shell_quote(text) + " --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("17 token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ctx"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("longer text"), std::string::npos) << r.err;
  const std::string bad = text_file(dir, "latin1.txt", std::string(600, 'a') + "caf\xe9");
  r = run_wick("ppl --text " + shell_quote(bad) + " --ctx 64");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
  r = run_wick("ppl --text " + shell_quote(text) + " --ctx 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("at least 2"), std::string::npos) << r.err;
  r = run_wick("ppl --text " + shell_quote((dir / "missing.txt").string()));
  EXPECT_EQ(r.status, 1);
}

TEST(CliKl, JsonReportsMeanIntervalBucketsAndAgreement) {
  const std::string text = text_file(scratch_dir(), "english.txt", kEnglishText);
  const std::string dense = fixture("rwkvq/tiny_world_dense.safetensors");
  const std::string quant = fixture("rwkvq/tiny_compression.rwkvq");
  CliRun r = run_wick("kl --reference " + shell_quote(dense) + " --model " + shell_quote(quant) +
                      " --text " + shell_quote(text) + " --ctx 128 --max-windows 4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double mean = j["mean_kl"], low = j["ci_low"], high = j["ci_high"];
  EXPECT_GT(mean, 0.0);
  EXPECT_LE(low, mean);
  EXPECT_GE(high, mean);
  EXPECT_EQ(j["windows"], 4);
  EXPECT_EQ(j["positions"], 4 * 127);
  EXPECT_EQ(j["window_kl"].size(), 4u);
  EXPECT_EQ(j["resamples"], 20000);
  ASSERT_EQ(j["buckets"].size(), 2u);
  EXPECT_EQ(j["buckets"][1]["begin"], 64);
  EXPECT_EQ(j["buckets"][1]["positions"], 4 * 63);
  const double top1 = j["top1_agreement"];
  EXPECT_GT(top1, 0.0);
  EXPECT_LT(top1, 1.0);
  // Text form; a model against itself.
  r = run_wick("kl --reference " + shell_quote(dense) + " --model " + shell_quote(dense) +
               " --text " + shell_quote(text) + " --ctx 128");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("KL(reference || model) 0 nats/token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("top-1 agreement 1.0000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("positions [64, 128)"), std::string::npos) << r.out;
  // --reference and --model are both required.
  r = run_wick("kl --model " + shell_quote(dense) + " --text " + shell_quote(text));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace wick::test
