// `wick bench --model`: the llama-bench style JSON lines (fields are a contract of issue 5), on the
// embedded model and on an .rwkvq fixture. Speed itself is never asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "bench/roofline.h"
#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

TEST(CliBenchModel, JsonLinesCarryTheContractFields) {
  for (const std::string model : {std::string(), fixture("rwkvq/tiny_reduction.rwkvq")}) {
    SCOPED_TRACE(model);
    const CliRun r = run_wick("bench " + (model.empty() ? "" : "--model " + shell_quote(model)) +
                              " --threads 1 --prompt 8,16 --gen 4 --reps 2 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<nlohmann::json> lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    EXPECT_EQ(lines[0]["test"], "pp8");
    EXPECT_EQ(lines[1]["test"], "pp16");
    EXPECT_EQ(lines[2]["test"], "tg4");
    EXPECT_EQ(lines[1]["n_prompt"], 16);
    EXPECT_EQ(lines[2]["n_gen"], 4);
    for (const nlohmann::json& j : lines) {
      for (const char* k : {"test", "n_prompt", "n_gen", "threads", "weight_format", "size_bytes",
                            "tokens_per_s", "stddev", "ms_per_token", "load_ms"})
        EXPECT_TRUE(j.contains(k)) << k << " in " << j.dump();
      EXPECT_EQ(j["threads"], 1);
      EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    }
    EXPECT_TRUE(lines[0].contains("peak_rss_during_prefill_bytes"));
    EXPECT_GT(lines[2]["bytes_per_token"].get<double>(), 0);
    EXPECT_GT(lines[2]["roofline_fraction"].get<double>(), 0);
    if (!model.empty()) EXPECT_EQ(lines[0]["weight_format"], "rwkvq sym@8");
  }
  // --prompt 0 --gen 0 skip both tests; a negative length is refused.
  EXPECT_EQ(run_wick("bench --prompt 0 --gen 0 --json").out, "");
  EXPECT_NE(run_wick("bench --prompt -1").status, 0);
}

// `wick bench generate --json`: the batch records keep their fields and carry the limit of the
// same run (bench/roofline.h batch_decode_limit_tokens_per_s) beside them, computed from the
// model's own FLOPs and bytes; products in integers are not judged.
TEST(CliBenchGenerate, BatchRecordsCarryTheirLimit) {
  const CliRun r = run_wick(
      "bench generate --prompt-tokens 2 --gen 3 --reps 1 --batch 1,2 --bandwidth-mib 16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0]["test"], "decode_greedy");
  EXPECT_EQ(lines[1]["test"], "decode_sampled");
  const Model model = Model::load_default();
  for (int i : {2, 3}) {
    const nlohmann::json& j = lines[i];
    EXPECT_EQ(j["test"], "batch");
    const int rows = i - 1;
    EXPECT_EQ(j["rows"], rows);
    for (const char* k : {"batch_tokens_per_s", "one_by_one_tokens_per_s", "speedup", "threads",
                          "flops_per_token", "gflop_s", "fma_peak_gflop_s", "fma_peak_fraction",
                          "bytes_per_step", "bandwidth_gb_s", "limit_tokens_per_s",
                          "limit_fraction", "speedup_limit"})
      EXPECT_GT(j.value(k, 0.0), 0) << k << " in " << j.dump();
    EXPECT_FALSE(j.value("probe_isa", std::string()).empty());
    // The model's own figures: its decode FLOPs and the weight bytes a step reads.
    const double flops = j["flops_per_token"], bytes = j["bytes_per_step"];
    EXPECT_DOUBLE_EQ(flops, bench::decode_flops_per_token(model.geometry()));
    EXPECT_DOUBLE_EQ(bytes, static_cast<double>(model.info().bytes_per_token));
    // The limit from the record's own peak and bandwidth (rows / the longer of computing and
    // reading), and the other figures each other's arithmetic: the FLOP rate is tokens/s x FLOPs
    // a token, the fractions its share of the peak and the batch's share of the limit, the bound
    // the limit over one row's speed.
    const double tps = j["batch_tokens_per_s"], limit = j["limit_tokens_per_s"];
    const double peak = j["fma_peak_gflop_s"].get<double>() * 1e9;
    const double bw = j["bandwidth_gb_s"].get<double>() * 1e9;
    EXPECT_NEAR(limit, rows / std::max(rows * flops / peak, bytes / bw), 1e-9 * limit);
    EXPECT_NEAR(j["gflop_s"].get<double>(), tps * flops / 1e9, 1e-9 * tps * flops);
    EXPECT_NEAR(j["fma_peak_fraction"].get<double>(), tps * flops / peak, 1e-9);
    EXPECT_NEAR(j["limit_fraction"].get<double>(), tps / limit, 1e-9);
    EXPECT_NEAR(j["speedup_limit"].get<double>(),
                limit / j["one_by_one_tokens_per_s"].get<double>(), 1e-9);
  }
  // The limit grows with the rows (the same peak and bandwidth judge both): two rows read the
  // weights once for two tokens.
  EXPECT_GT(lines[3]["limit_tokens_per_s"].get<double>(),
            lines[2]["limit_tokens_per_s"].get<double>());
  // Integer products (int8 weights): the batch is measured but not judged.
  const CliRun q = run_wick(
      "bench generate --prompt-tokens 2 --gen 2 --reps 1 --batch 2 --quantize int8 --json");
  ASSERT_EQ(q.status, 0) << q.err;
  const std::vector<nlohmann::json> ql = json_lines(q.out);
  ASSERT_EQ(ql.size(), 3u) << q.out;
  EXPECT_GT(ql[2].value("batch_tokens_per_s", 0.0), 0);
  for (const char* k : {"fma_peak_gflop_s", "bandwidth_gb_s", "limit_tokens_per_s"})
    EXPECT_FALSE(ql[2].contains(k)) << k << " in " << ql[2].dump();
  // The text table: the limits line and the judged columns.
  const CliRun t =
      run_wick("bench generate --prompt-tokens 2 --gen 2 --reps 1 --batch 2 --bandwidth-mib 16");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("limits     FMA peak"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("limit tok/s  % limit  max speedup"), std::string::npos) << t.out;
  EXPECT_NE(run_wick("bench generate --bandwidth-mib 0").status, 0);
}

}  // namespace
}  // namespace wick::test
