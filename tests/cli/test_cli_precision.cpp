// `--precision fp32|bf16|int8` (cli/common.h add_load_options) as users run it: logits change
// with bf16 and int8 (and the recurrent step still equals the parallel pass, also for a .rwkvq
// file whose packed products run in integers), bench --json reports the precision, ppl accepts it,
// and other values are refused.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"

namespace wick::test {
namespace {

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";

TEST(CliPrecision, RoundedLogitsDifferAndRecurrentEqualsParallel) {
  for (const char* model : {kModel, "rwkvq/tiny_compression.rwkvq"}) {
    const std::string m = shell_quote(fixture(model));
    const std::string args = "logits --tokens 34,105,110 --all-positions --model " + m;
    const CliRun dense = run_wick(args);
    const CliRun fp32 = run_wick(args + " --precision fp32");
    ASSERT_EQ(dense.status, 0) << dense.err;
    EXPECT_EQ(fp32.out, dense.out) << model;  // fp32 is the default
    for (const std::string p : {"bf16", "int8"}) {
      const CliRun par = run_wick(args + " --precision " + p);
      const CliRun rec = run_wick(args + " --precision " + p + " --recurrent");
      ASSERT_EQ(par.status, 0) << par.err;
      ASSERT_EQ(rec.status, 0) << rec.err;
      EXPECT_NE(par.out, dense.out) << model << " " << p;
      EXPECT_EQ(par.out, rec.out) << model << " " << p;
    }
  }
}

TEST(CliPrecision, BenchJsonReportsThePrecision) {
  for (const std::string p : {"fp32", "bf16", "int8"}) {
    const CliRun r = run_wick("bench --precision " + p + " --threads 1 --prompt 8 --gen 2 --reps 1 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    std::istringstream in(r.out);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      EXPECT_EQ(nlohmann::json::parse(line)["precision"], p) << line;
      ++n;
    }
    EXPECT_EQ(n, 2);
  }
  const CliRun text = run_wick("bench --precision bf16 --threads 1 --prompt 0 --gen 2 --reps 1");
  EXPECT_NE(text.out.find("bf16 matmul inputs"), std::string::npos) << text.out;
}

TEST(CliPrecision, PplAcceptsItAndOtherValuesAreRefused) {
  const std::string text = (scratch_dir() / "precision.txt").string();
  write_file(text, std::string(300, 'a') + " The quick brown fox jumps over the lazy dog.");
  const std::string m = shell_quote(fixture(kModel));
  const std::string ppl = "ppl --ctx 64 --json --model " + m + " --text " + shell_quote(text);
  const CliRun a = run_wick(ppl), b = run_wick(ppl + " --precision bf16");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(nlohmann::json::parse(a.out)["ppl"], nlohmann::json::parse(b.out)["ppl"]);
  const CliRun bad = run_wick("logits --tokens 1 --precision fp16 --model " + m);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--precision"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace wick::test
