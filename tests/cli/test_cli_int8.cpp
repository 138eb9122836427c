// `--quantize none|int8` on the commands that load a model to run it (cli/common.h
// add_load_options): info reports it, logits change with it (and the recurrent step still
// equals the parallel pass), bench --json names the weight format, the other commands accept it,
// and wrong values / .rwkvq files are refused.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace wick::test {
namespace {

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";

TEST(CliInt8, InfoReportsTheInt8Weights) {
  const std::string m = shell_quote(fixture(kModel));
  const CliRun dense = run_wick("info --json --model " + m);
  const CliRun q = run_wick("info --json --quantize int8 --model " + m);
  ASSERT_EQ(dense.status, 0) << dense.err;
  ASSERT_EQ(q.status, 0) << q.err;
  const nlohmann::json jd = nlohmann::json::parse(dense.out), jq = nlohmann::json::parse(q.out);
  EXPECT_EQ(jd["quantization"], "none");
  EXPECT_EQ(jq["quantization"], "int8");
  EXPECT_FALSE(jd.contains("layouts"));
  ASSERT_TRUE(jq.contains("layouts")) << q.out;
  EXPECT_GT(jq["layouts"]["int8 (g128)"].get<uint64_t>(), 0u);
  EXPECT_LT(jq["weight_bytes"].get<uint64_t>(), jd["weight_bytes"].get<uint64_t>());
  EXPECT_EQ(jq["parameters"], jd["parameters"]);
  // Text mode names the layout; "none" is the default.
  const CliRun text = run_wick("info --quantize int8 --model " + m);
  EXPECT_NE(text.out.find("int8 (g128)"), std::string::npos) << text.out;
  EXPECT_EQ(run_wick("info --json --quantize none --model " + m).out, dense.out);
}

TEST(CliInt8, LogitsDifferFromDenseAndRecurrentEqualsParallel) {
  const std::string m = shell_quote(fixture(kModel));
  const std::string args = "logits --tokens 34,105,110 --all-positions --model " + m;
  const CliRun dense = run_wick(args);
  const CliRun par = run_wick(args + " --quantize int8");
  const CliRun rec = run_wick(args + " --quantize int8 --recurrent");
  ASSERT_EQ(par.status, 0) << par.err;
  ASSERT_EQ(rec.status, 0) << rec.err;
  EXPECT_NE(par.out, dense.out);
  EXPECT_EQ(par.out, rec.out);  // the same bits, printed the same way
  EXPECT_EQ(nlohmann::json::parse(par.out)["logits"].size(), 3u);
}

TEST(CliInt8, BenchJsonNamesTheWeightFormat) {
  const CliRun r = run_wick("bench --quantize int8 --threads 1 --prompt 8 --gen 4 --reps 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["weight_format"], "int8") << line;
    ++n;
  }
  EXPECT_EQ(n, 2);
  const CliRun dense = run_wick("bench --threads 1 --prompt 0 --gen 2 --reps 1 --json");
  EXPECT_EQ(nlohmann::json::parse(dense.out)["weight_format"], "F32") << dense.out;
}

TEST(CliInt8, GeneratePplAndKlAcceptTheFlag) {
  const CliRun g = run_wick("generate --quantize int8 --prompt 'Once upon' --max-tokens 8 --json");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["generated_tokens"], 8);
  const std::string text = (scratch_dir() / "text.txt").string();
  write_file(text, std::string(400, 'a') + "The quick brown fox jumps over the lazy dog. " +
                       "Pack my box with five dozen liquor jugs.");
  const std::string m = shell_quote(fixture(kModel));
  const CliRun ppl =
      run_wick("ppl --quantize int8 --ctx 64 --json --model " + m + " --text " + shell_quote(text));
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  EXPECT_GT(nlohmann::json::parse(ppl.out)["ppl"].get<double>(), 1.0);
  // kl: --quantize applies to --model (Q), not to --reference (P).
  const CliRun kl = run_wick("kl --quantize int8 --ctx 64 --json --reference " + m + " --model " +
                             m + " --text " + shell_quote(text));
  ASSERT_EQ(kl.status, 0) << kl.err;
  const double v = nlohmann::json::parse(kl.out)["mean_kl"].get<double>();
  EXPECT_GT(v, 0.0) << kl.out;
  EXPECT_LT(v, 1e-2) << kl.out;
}

TEST(CliInt8, RefusesOtherValuesAndRwkvqFiles) {
  const CliRun bad = run_wick("info --quantize int4");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("int4"), std::string::npos) << bad.err;
  const CliRun rq = run_wick("info --quantize int8 --model " +
                             shell_quote(fixture("rwkvq/tiny_reduction.rwkvq")));
  EXPECT_EQ(rq.status, 1) << rq.err;
  EXPECT_NE(rq.err.find("without --quantize int8"), std::string::npos) << rq.err;
}

}  // namespace
}  // namespace wick::test
