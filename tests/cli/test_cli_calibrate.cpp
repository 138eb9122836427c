// `wick calibrate` as users run it: the file it writes is what the library computes, `wick
// quantize --config` accepts it, the table lists every measured candidate, and the refusals (two
// budgets, missing options, a quantised input) exit with status 1 or a usage error.
#include <gtest/gtest.h>

#include "quant/quant_config.h"
#include "tasks/eval_texts.h"
#include "test_util.h"
#include "wick/calibrate.h"
#include "wick/perplexity.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

TEST(CliCalibrate, WritesAConfigThatQuantizeAccepts) {
  const auto dir = scratch_dir();
  const std::string text = (dir / "english.txt").string();
  write_file(text, kEnglishText);
  const std::string model = fixture("rwkvq/tiny_world_dense.safetensors");
  const std::string stats = fixture("rwkvq/tiny_act_stats.safetensors");
  const std::string cfg = (dir / "calib.json").string();
  CliRun r = run_wick("calibrate --model " + q(model) + " --text " + q(text) + " --out " + q(cfg) +
                      " --ctx 64 --max-windows 1 --max-kl 0.5 --act-stats " + q(stats) +
                      " --work-dir " + q(dir.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + cfg + ": budget 0.5 nats/token (KL) over 1 windows (63 "
                       "positions)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("proj"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<- chosen"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("interactions between groups"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);  // no progress bar off a terminal

  // Same result as the library.
  const nlohmann::json j = nlohmann::json::parse(read_file(cfg));
  CalibrateOptions o;
  o.max_kl = 0.5;
  o.act_stats_path = stats;
  const auto ids = ByteTokenizer().encode(kEnglishText);
  const CalibrationResult lib = calibrate(model, cut_windows(ids, {64, 1}), o);
  EXPECT_EQ(j.at("config"), nlohmann::json::parse(lib.config_json));
  EXPECT_EQ(j.at("config").at("act_stats_path"), stats);
  EXPECT_NO_THROW(quant::QuantConfig::from_json(j.at("config"), cfg));

  const std::string out = (dir / "calibrated.rwkvq").string();
  r = run_wick("quantize " + q(model) + " " + q(out) + " --config " + q(cfg) + " --act-stats " +
               q(stats));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
  r = run_wick("ppl --model " + q(out) + " --text " + q(text) + " --ctx 64 --max-windows 1");
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST(CliCalibrate, PerplexityBudget) {
  const auto dir = scratch_dir();
  const std::string text = (dir / "english.txt").string();
  write_file(text, kEnglishText);
  const std::string cfg = (dir / "calib.json").string();
  const CliRun r = run_wick("calibrate -m " + q(fixture("rwkvq/tiny_world_dense.safetensors")) +
                            " --text " + q(text) + " -o " + q(cfg) +
                            " --ctx 64 --max-windows 1 --ppl-threshold-pct 5 --no-composite");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("% (delta ppl)"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(cfg));
  EXPECT_EQ(j.at("calibration_report").at("metric"), "ppl");
  EXPECT_FALSE(j.at("calibration_report").contains("composite"));
}

TEST(CliCalibrate, Refusals) {
  const auto dir = scratch_dir();
  const std::string text = (dir / "english.txt").string();
  write_file(text, kEnglishText);
  const std::string model = fixture("rwkvq/tiny_world_dense.safetensors");
  const std::string cfg = (dir / "calib.json").string();
  CliRun r = run_wick("calibrate -m " + q(model) + " --text " + q(text) + " -o " + q(cfg) +
                      " --max-kl 0.1 --ppl-threshold-pct 5 --ctx 64");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("give one budget"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = run_wick("calibrate -m " + q(model) + " --text " + q(text));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 1);  // a usage error
  r = run_wick("calibrate -m " + q(fixture("rwkvq/tiny_reduction.rwkvq")) + " --text " + q(text) +
               " -o " + q(cfg) + " --ctx 64 --max-windows 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already a quantised"), std::string::npos) << r.err;
  r = run_wick("calibrate -m " + q(model) + " --text " + q(text) + " -o " + q(cfg) +
               " --ctx 100000");
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(std::filesystem::exists(cfg));
}

}  // namespace
}  // namespace wick::test
