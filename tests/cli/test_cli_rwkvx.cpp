// RWKV-X on the command line: info, logits in both attention modes against the rwkv-x package's
// fixtures, generation from a synthetic hybrid, the KV limit, and flags refused on plain models.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>

#include "test_util.h"

namespace wick::test {
namespace {

std::string tiny_x() { return shell_quote(fixture("rwkvx/rwkvx-tiny.safetensors")); }

// The first n fixture tokens as "a,b,c".
std::string token_list(const std::vector<int32_t>& t, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ',';
    s += std::to_string(t[i]);
  }
  return s;
}

TEST(CliRwkvX, InfoReportsTheHybrid) {
  CliRun r = run_wick("info --model " + tiny_x() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "rwkv-x");
  EXPECT_EQ(j["geometry"]["n_attn"], 2);
  EXPECT_EQ(j["geometry"]["n_layer"], 4);
  EXPECT_EQ(j["attention"]["mode"], "full");
  EXPECT_EQ(j["kv_bytes_per_token"], 2 * 2 * 128 * 4);
  CliRun text = run_wick("info --model " + tiny_x() + " --attention moba --moba-block 32 --moba-topk 2");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("moba (B=32, K=2, shared, K past blocks)"), std::string::npos) << text.out;
}

TEST(CliRwkvX, LogitsMatchThePackageInBothModes) {
  struct Case {
    const char* file;
    std::string flags;
    size_t n;
  };
  for (const Case& c : {Case{"rwkvx/full-seq96.safetensors", "", 96},
                        Case{"rwkvx/sparse-b32k2-seq300.safetensors",
                             " --attention moba --moba-block 32 --moba-topk 2", 160}}) {
    io::TensorSet f = load_fixture_tensors(c.file);
    const std::vector<int32_t> tokens = ints(f, "tokens");
    const std::vector<float> ref = floats(f, "logits");
    for (const char* pass : {"", " --recurrent"}) {
      CliRun r = run_wick("logits --model " + tiny_x() + c.flags + pass + " --tokens " +
                          token_list(tokens, c.n));
      ASSERT_EQ(r.status, 0) << r.err;
      const std::vector<float> last = nlohmann::json::parse(r.out)["logits"][0].get<std::vector<float>>();
      ASSERT_EQ(last.size(), 256u);
      EXPECT_LT(max_abs_diff(last.data(), ref.data() + (c.n - 1) * 256, 256), 1e-4) << c.file << pass;
    }
  }
}

TEST(CliRwkvX, SynthesisedHybridGeneratesAndTheKvLimitIsEnforced) {
  const std::string path = (scratch_dir() / "x.safetensors").string();
  CliRun s = run_wick("synth --geometry 4:128:256 --attention-blocks 2 --dtype fp32 --seed 3 --out " +
                      shell_quote(path) + " --json");
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(nlohmann::json::parse(s.out)["dims"]["n_attn"], 2);
  CliRun g = run_wick("generate --model " + shell_quote(path) +
                      " --prompt hello --max-tokens 8 --json --attention moba --moba-block 4 --moba-topk 1");
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["tokens"].size(), 8u);
  // 5 prompt bytes + 8 tokens do not fit in 10 rows: generation stops after 5 tokens, each
  // absorbed into the state.
  CliRun full = run_wick("generate --model " + shell_quote(path) +
                         " --prompt hello --max-tokens 8 --kv-max 10 --json");
  ASSERT_EQ(full.status, 0) << full.err;
  const nlohmann::json fj = nlohmann::json::parse(full.out);
  EXPECT_EQ(fj["stop_reason"], "kv_cache_full");
  EXPECT_EQ(fj["tokens"].size(), 5u);
  // A prompt longer than the limit is refused before anything runs.
  CliRun refused = run_wick("generate --model " + shell_quote(path) +
                            " --prompt 'hello world' --max-tokens 8 --kv-max 10");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.err.find("kv_max"), std::string::npos) << refused.err;
}

// `wick quantize` of an RWKV-X checkpoint writes an .rwkvq that wick runs (issue 21: it used to
// be refused as "not an RWKV-7 x070 checkpoint"), and `wick info` reports it as the hybrid.
TEST(CliRwkvX, QuantizedFileRunsAndInfoReportsIt) {
  const std::string out = (scratch_dir() / "x.rwkvq").string();
  CliRun q = run_wick("quantize " + tiny_x() + " " + shell_quote(out) + " --plain --layout sym:8");
  ASSERT_EQ(q.status, 0) << q.err;
  CliRun r = run_wick("info --model " + shell_quote(out) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "rwkv-x");
  EXPECT_EQ(j["container"], "rwkvq v2");
  EXPECT_EQ(j["geometry"]["n_attn"], 2);
  EXPECT_EQ(j["layouts"]["sym@8"], 6 * 128 * 512);  // FFN value of 4 RWKV + 2 attention blocks
  // The last logits of full-seq96: the same from both passes, near the package's dense ones
  // (measured max |diff| 0.20 for sym:8 on this random-weight model; the library tests bound
  // the quantised model tightly against its own dequantised weights).
  io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<float> ref = floats(f, "logits");
  std::vector<std::vector<float>> last;
  for (const char* pass : {"", " --recurrent"}) {
    CliRun l = run_wick("logits --model " + shell_quote(out) + pass + " --tokens " +
                        token_list(ints(f, "tokens"), 96));
    ASSERT_EQ(l.status, 0) << l.err;
    last.push_back(nlohmann::json::parse(l.out)["logits"][0].get<std::vector<float>>());
    ASSERT_EQ(last.back().size(), 256u);
    EXPECT_LT(max_abs_diff(last.back().data(), ref.data() + 95 * 256, 256), 0.5) << pass;
  }
  EXPECT_EQ(last[0], last[1]);
}

TEST(CliRwkvX, AttentionFlagsOnAPlainModelAreRefused) {
  CliRun r = run_wick("logits --tokens 1,2 --attention moba");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("plain RWKV-7 model without attention blocks"), std::string::npos) << r.err;
}

// A huge `bench --depth` used to end in "internal error: std::bad_alloc" (exit 2) once the KV
// caches were allocated. The size is now checked first and named. `ulimit -v` bounds this run's
// memory, so the check refuses on any machine and nothing large is ever allocated.
// Not in the AddressSanitizer build: ASan reserves terabytes of address space for its shadow
// memory at start, so such a binary cannot run under `ulimit -v` at all.
TEST(CliRwkvX, WICK_NOT_UNDER_ASAN(BenchDepthBeyondMemoryIsRefusedBeforeAllocating)) {
  const auto dir = scratch_dir();
  const std::string err = (dir / "err.txt").string();
  const std::string cmd = "ulimit -v 4194304 && exec " + shell_quote(WICK_CLI_PATH) +
                          " bench --model " + tiny_x() +
                          " --prompt 0 --gen 4 --reps 1 --depth 16777216 </dev/null >/dev/null 2>" +
                          shell_quote(err);
  const int st = std::system(("/bin/sh -c " + shell_quote(cmd)).c_str());
  ASSERT_TRUE(WIFEXITED(st));
  const std::string e = read_file(err);
  EXPECT_EQ(WEXITSTATUS(st), 1) << e;
  EXPECT_NE(e.find("--depth 16777216 needs about"), std::string::npos) << e;
  EXPECT_NE(e.find("GiB of memory; lower --depth"), std::string::npos) << e;
  EXPECT_EQ(e.find("bad_alloc"), std::string::npos) << e;
}

}  // namespace
}  // namespace wick::test
