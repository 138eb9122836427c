// `--lora FILE --lora-alpha A [--lora-scale S]` on the commands that load a model (cli/common.h
// add_lora_options) and `wick lora-merge` (cli/cmd_lora_merge.cpp), on the embedded tiny model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

bool has(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

// A rank-4 RWKV-PEFT adapter on every adapted matrix of the tiny model, plus ln_out.weight.
std::string write_adapter(const std::filesystem::path& dir, const Geometry& g,
                          const std::map<std::string, std::string>& meta = {}) {
  const int r = 4;
  const int64_t C = g.n_embd, F = g.ffn_dim;
  struct M {
    const char* name;
    int64_t out, in;
  };
  const M ms[] = {{"att.receptance", C, C}, {"att.key", C, C},   {"att.value", C, C},
                  {"att.output", C, C},     {"ffn.key", F, C},   {"ffn.value", C, F}};
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::vector<std::vector<float>> store;
  std::vector<io::TensorToWrite> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    store.emplace_back(static_cast<size_t>(n));
    for (float& v : store.back()) v = d(rng);
    ts.push_back({name, DType::F32, shape, {}});
  };
  store.reserve(static_cast<size_t>(g.n_layer) * 12 + 1);
  for (int l = 0; l < g.n_layer; ++l)
    for (const M& m : ms) {
      const std::string base = "blocks." + std::to_string(l) + "." + m.name;
      add(base + ".lora_A", {r, m.in});
      add(base + ".lora_B", {m.out, r});
    }
  add("ln_out.weight", {C});
  for (float& v : store.back()) v += 1.f;
  for (size_t i = 0; i < ts.size(); ++i)
    ts[i].bytes = std::string_view(reinterpret_cast<const char*>(store[i].data()),
                                   store[i].size() * sizeof(float));
  const std::string path = (dir / "adapter.safetensors").string();
  io::write_safetensors(path, ts, meta);
  return path;
}

std::vector<float> logits_of(const CliRun& r) {
  std::vector<float> v;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& row : j["logits"])
    for (const auto& x : row) v.push_back(x.get<float>());
  return v;
}

TEST(CliLora, LogitsWithAdapterAndLoraMerge) {
  const auto dir = scratch_dir();
  const std::string model = fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors");
  const std::string ad = write_adapter(dir, Model::load(model).geometry());
  const std::string m = " --model " + shell_quote(model);
  const std::string args = "logits --tokens 34,105,110 --all-positions" + m;
  const CliRun plain = run_wick(args);
  const CliRun lora = run_wick(args + " --lora " + shell_quote(ad) + " --lora-alpha 8");
  const CliRun rec = run_wick(args + " --lora " + shell_quote(ad) + " --lora-alpha 8 --recurrent");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(lora.status, 0) << lora.err;
  ASSERT_EQ(rec.status, 0) << rec.err;
  EXPECT_NE(lora.out, plain.out);
  EXPECT_EQ(lora.out, rec.out);
  // --lora-scale 0 switches the factors off (the replaced ln_out stays): not the plain logits and
  // not the adapted ones; scale 2 with alpha 4 is alpha 8.
  const CliRun off = run_wick(args + " --lora " + shell_quote(ad) + " --lora-alpha 8 --lora-scale 0");
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_NE(off.out, lora.out);
  EXPECT_NE(off.out, plain.out);
  EXPECT_EQ(run_wick(args + " --lora " + shell_quote(ad) + " --lora-alpha 4 --lora-scale 2").out,
            lora.out);

  // Missing alpha: exit 1 with the flag to use.
  const CliRun no_alpha = run_wick(args + " --lora " + shell_quote(ad));
  EXPECT_EQ(no_alpha.status, 1);
  EXPECT_TRUE(has(no_alpha.err, "--lora-alpha")) << no_alpha.err;

  // info names the adapter.
  const CliRun info = run_wick("info --json" + m + " --lora " + shell_quote(ad) + " --lora-alpha 8");
  ASSERT_EQ(info.status, 0) << info.err;
  EXPECT_TRUE(has(nlohmann::json::parse(info.out)["adapter"].get<std::string>(), "rank 4"));

  // lora-merge: the merged model gives the run-time adapter's logits (1e-5 relative).
  const std::string merged = (dir / "merged.safetensors").string();
  const CliRun mr = run_wick("lora-merge" + m + " --lora " + shell_quote(ad) +
                             " --lora-alpha 8 --out " + shell_quote(merged));
  ASSERT_EQ(mr.status, 0) << mr.err;
  EXPECT_TRUE(has(mr.out, "72 matrices merged")) << mr.out;
  EXPECT_TRUE(has(mr.out, "1 norms replaced")) << mr.out;
  const CliRun from_merged = run_wick("logits --tokens 34,105,110 --all-positions --model " +
                                      shell_quote(merged));
  ASSERT_EQ(from_merged.status, 0) << from_merged.err;
  const std::vector<float> a = logits_of(lora), b = logits_of(from_merged);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  EXPECT_LE(diff / scale, 1e-5);
  // An existing output needs --force; int8 is refused with the way to do it; alpha is required.
  const std::string merge = "lora-merge" + m + " --lora " + shell_quote(ad) + " --out " +
                            shell_quote(merged);
  EXPECT_EQ(run_wick(merge + " --lora-alpha 8").status, 1);
  const CliRun q = run_wick(merge + " --lora-alpha 8 --force --quantize int8");
  EXPECT_EQ(q.status, 1);
  EXPECT_TRUE(has(q.err, "dense")) << q.err;
  const CliRun na = run_wick(merge + " --force");
  EXPECT_EQ(na.status, 1);
  EXPECT_TRUE(has(na.err, "--lora-alpha")) << na.err;
}

TEST(CliLora, ServeHasNoLoraFlag) {
  const CliRun r = run_wick("serve --help");
  EXPECT_FALSE(has(r.out, "--lora")) << r.out;
  const CliRun g = run_wick("generate --help");
  EXPECT_TRUE(has(g.out, "--lora-alpha")) << g.out;
}

}  // namespace
}  // namespace wick::test
