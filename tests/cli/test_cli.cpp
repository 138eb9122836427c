// The `wick` command line as users (and outside checks) run it: the exact forms and JSON fields
// of the issue contract, stdout carrying only results.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "test_util.h"
#include "wick/model.h"
#include "wick/version.h"

namespace wick::test {
namespace {

std::string quote(const std::string& s) { return shell_quote(s); }
CliRun wick(const std::string& args) { return run_wick(args); }

const char* kSeq64Prompt = "Once upon a time, in a small caf\xc3\xa9 by the sea, the old man said:";

TEST(Cli, GenerateJsonReturnsTheFixtureGreedyTokens) {
  io::TensorSet data = load_fixture_tensors("tiny-rwkv7/seq64.safetensors");
  const std::vector<int32_t> greedy = ints(data, "greedy.tokens");
  for (std::string model : {std::string(""), "--model " + quote(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors")),
                            "--model " + quote(fixture("tiny-rwkv7/tiny-rwkv7-834K.pth"))}) {
    CliRun r = wick("generate " + model + " --prompt " + quote(kSeq64Prompt) + " --max-tokens 32 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), greedy) << model;
    EXPECT_EQ(j["text"], " the the the the the the the the");
    EXPECT_EQ(j["stop_reason"], "max_tokens");
    EXPECT_EQ(j["prompt_tokens"], 64);
    EXPECT_TRUE(j["timings"].contains("prefill_ms"));
    EXPECT_TRUE(j["timings"].contains("decode_ms"));
  }
}

TEST(Cli, GeneratePrintsOnlyTheTextOnStdout) {
  CliRun r = wick("generate --prompt " + quote(kSeq64Prompt) + " --max-tokens 8");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, " the the");  // a pipe gets exactly the text (a terminal also a newline)
  EXPECT_NE(r.err.find("tokens"), std::string::npos);  // diagnostics on stderr
}

TEST(Cli, LogitsMatchTheReferenceInBothPasses) {
  io::TensorSet data = load_fixture_tensors("tiny-rwkv7/prompt3.safetensors");
  const std::vector<float> ref = floats(data, "logits");
  for (const char* mode : {"", " --recurrent"}) {
    CliRun r = wick(std::string("logits --tokens 34,105,110 --all-positions") + mode);
    ASSERT_EQ(r.status, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["logits"].size(), 3u);
    std::vector<float> got;
    for (auto& row : j["logits"]) {
      ASSERT_EQ(row.size(), 256u);
      for (auto& x : row) got.push_back(x.get<float>());
    }
    EXPECT_LE(max_abs_diff(got, ref), 1e-5) << mode;
  }
  // Without --all-positions: only the last row, printed so that every float reads back bit for bit
  // to what the library computes.
  CliRun last = wick("logits --tokens 34,105,110");
  nlohmann::json j = nlohmann::json::parse(last.out);
  ASSERT_EQ(j["logits"].size(), 1u);
  Model m = Model::load_default();
  State st = m.new_state();
  const std::vector<float> lib = m.forward(std::vector<int32_t>{34, 105, 110}, st);
  ASSERT_EQ(j["logits"][0].size(), lib.size());
  for (size_t i = 0; i < lib.size(); ++i) {
    const float printed = static_cast<float>(std::stod(j["logits"][0][i].dump()));
    EXPECT_EQ(printed, lib[i]) << i;
  }
  // Malformed token lists are errors, not silently "fixed".
  for (const char* bad : {"''", "1,,2", "1,x", "99999999999"}) {
    CliRun r = wick(std::string("logits --tokens ") + bad);
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_TRUE(r.out.empty()) << bad;
  }
}

TEST(Cli, InfoReportsGeometryDtypesParametersAndSize) {
  CliRun r = wick("info --model " + quote(fixture("tiny-rwkv7/hf")) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["geometry"]["n_layer"], 12);
  EXPECT_EQ(j["geometry"]["n_embd"], 64);
  EXPECT_EQ(j["geometry"]["vocab"], 256);
  EXPECT_EQ(j["parameters"], 829888);
  EXPECT_EQ(j["dtypes"]["F32"], 829888);
  EXPECT_EQ(j["naming"], "huggingface-fla");
  EXPECT_EQ(j["file_bytes"], 3358656);
  CliRun text = wick("info");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("L=12 C=64 H=1 N=64 F=256 V=256"), std::string::npos) << text.out;
}

// --version prints the one version the library has (wick/version.h, from CMake's project()).
TEST(Cli, VersionIsTheLibrarysVersion) {
  const CliRun r = wick("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "wick " + std::string(version()) + "\n");
  const std::string v(version());
  ASSERT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(v.front())) &&
              std::isdigit(static_cast<unsigned char>(v.back())))
      << v;
}

TEST(Cli, ErrorsGoToStderrWithNonZeroStatus) {
  CliRun r = wick("logits --tokens 1,999");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("999"), std::string::npos) << r.err;
  CliRun missing = wick("info --model /nonexistent/model.pth");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model.pth"), std::string::npos) << missing.err;
  CliRun bad = wick("generate --model " + quote(fixture("tiny-rwkv7/README.md")) + " --prompt x");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("README.md"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace wick::test
