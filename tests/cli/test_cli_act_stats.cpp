// `wick act-stats` as users run it: the file it writes equals the library's result bit for bit
// (keys, metadata), the summary line, and the refusals (too-short text, missing options, a file
// that cannot be written), each with exit status 1 or a usage error and nothing on stdout.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "tasks/eval_texts.h"
#include "test_util.h"
#include "wick/act_stats.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

TEST(CliActStats, WritesTheLibrarysStatistics) {
  const auto dir = scratch_dir();
  const std::string text = (dir / "english.txt").string();
  write_file(text, kEnglishText);
  const std::string out = (dir / "stats.safetensors").string();
  const std::string model = fixture("rwkvq/tiny_world_dense.safetensors");
  CliRun r = run_wick("act-stats --model " + shell_quote(model) + " --text " + shell_quote(text) +
                      " --out " + shell_quote(out) + " --ctx 128 --max-windows 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + out +
                       ": E[x^2] per input channel of 13 weight matrices over 381 tokens (3 "
                       "windows of 128)\n");
  EXPECT_NE(r.err.find("381 of 1569 text tokens fed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);  // no progress bar off a terminal

  std::map<std::string, std::string> meta;
  const ActStats got = load_act_stats(out, &meta);
  const ActStatsResult lib =
      collect_act_stats(Model::load(model), ByteTokenizer(), kEnglishText, {128, 3});
  ASSERT_EQ(got.size(), lib.stats.size());
  for (const auto& [key, v] : lib.stats) {
    ASSERT_EQ(got.count(key), 1u) << key;
    ASSERT_EQ(got.at(key).size(), v.size()) << key;
    EXPECT_EQ(std::memcmp(got.at(key).data(), v.data(), v.size() * sizeof(float)), 0) << key;
  }
  EXPECT_EQ(meta.at("format"), "wick-act-stats-v1");
  EXPECT_EQ(meta.at("tokens"), "381");
  EXPECT_EQ(meta.at("windows"), "3");
  EXPECT_EQ(meta.at("ctx"), "128");
  EXPECT_EQ(meta.at("model_fingerprint"), lib.model_fingerprint);

  // A quantised model is accepted too (its own statistics).
  const std::string qout = (dir / "quant.safetensors").string();
  r = run_wick("act-stats -m " + shell_quote(fixture("rwkvq/tiny_reduction.rwkvq")) + " --text " +
               shell_quote(text) + " -o " + shell_quote(qout) + " --ctx 256");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("over 1530 tokens (6 windows of 256)"), std::string::npos) << r.out;
  EXPECT_EQ(load_act_stats(qout).size(), 13u);
}

TEST(CliActStats, Refusals) {
  const auto dir = scratch_dir();
  const std::string model = fixture("rwkvq/tiny_world_dense.safetensors");
  const std::string text = (dir / "short.txt").string();
  write_file(text, "Only a few words.");
  const std::string out = (dir / "stats.safetensors").string();
  CliRun r = run_wick("act-stats --model " + shell_quote(model) + " --text " + shell_quote(text) +
                      " --out " + shell_quote(out));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ctx"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  // --out, --text and --model are required.
  r = run_wick("act-stats --model " + shell_quote(model) + " --text " + shell_quote(text));
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.out, "");
  r = run_wick("act-stats --text " + shell_quote(text) + " --out " + shell_quote(out));
  EXPECT_NE(r.status, 0);
  // An output folder that does not exist.
  const std::string long_text = (dir / "english.txt").string();
  write_file(long_text, kEnglishText);
  r = run_wick("act-stats --model " + shell_quote(model) + " --text " + shell_quote(long_text) +
               " --ctx 256 --out " + shell_quote((dir / "no" / "such" / "x.safetensors").string()));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out, "");
  // The help names rwkv-quant's convention.
  r = run_wick("act-stats --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("dense"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace wick::test
