// wick::calibrate (include/wick/calibrate.h, docs/rwkvq-format.md §3.8) on the tiny fixture
// model: the candidate lists per group, the isolation rule (cheapest within the budget, bf16 when
// none is), monotonicity in the budget, the composite pass's bookkeeping (its final number is the
// KL of the file `wick quantize --config` writes), and the config round trip through
// QuantConfig::from_json and wick::quantize.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "io/mapped_file.h"
#include "quant/quant_config.h"
#include "quant/rwkvq.h"
#include "tasks/eval_texts.h"
#include "test_util.h"
#include "wick/calibrate.h"
#include "wick/errors.h"
#include "wick/perplexity.h"
#include "wick/quantize.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

std::string dense() { return fixture("rwkvq/tiny_world_dense.safetensors"); }

std::vector<std::vector<int32_t>> windows(int ctx, int64_t n) {
  const std::vector<int32_t> ids = ByteTokenizer().encode(kEnglishText);
  return cut_windows(ids, {ctx, n});
}

const CalibrationGroup& group(const CalibrationResult& r, const std::string& name) {
  for (const CalibrationGroup& g : r.groups)
    if (g.group == name) return g;
  throw std::runtime_error("no group " + name);
}

double chosen_cost(const CalibrationGroup& g) {
  return g.final_choice < 0 ? 16.0 : g.candidates[static_cast<size_t>(g.final_choice)].cost_bits;
}

// The isolation rule: every candidate before the choice was measured over the budget, the choice
// within it, nothing after it measured; no choice -> all measured, all over.
void expect_isolation_rule(const CalibrationResult& r) {
  for (const CalibrationGroup& g : r.groups) {
    SCOPED_TRACE(g.group);
    const int n = static_cast<int>(g.candidates.size());
    const int stop = g.isolated_choice < 0 ? n : g.isolated_choice;
    for (int i = 0; i < n; ++i) {
      const CalibrationCandidate& c = g.candidates[static_cast<size_t>(i)];
      if (i < stop) {
        EXPECT_TRUE(c.measured) << c.label();
        EXPECT_FALSE(c.within_budget) << c.label();
        EXPECT_GT(c.metric, r.budget) << c.label();
      } else if (i == stop) {
        EXPECT_TRUE(c.measured && c.within_budget) << c.label();
        EXPECT_LE(c.metric, r.budget) << c.label();
      } else {
        EXPECT_EQ(c.measured, c.from_composite) << c.label();
      }
    }
    for (int i = 1; i < n; ++i)
      EXPECT_LE(g.candidates[i - 1].cost_bits, g.candidates[i].cost_bits) << i;
  }
}

TEST(Calibrate, CandidateListsFollowTheShapes) {
  CalibrateOptions o;
  o.max_kl = std::numeric_limits<double>::max();
  o.composite = false;
  o.act_stats_path = fixture("rwkvq/tiny_act_stats.safetensors");
  const CalibrationResult r = calibrate(dense(), windows(64, 1), o);
  std::vector<std::string> names;
  for (const CalibrationGroup& g : r.groups) names.push_back(g.group);
  EXPECT_EQ(names, (std::vector<std::string>{"proj", "w_lora", "a_lora", "v_lora", "g_lora",
                                             "small", "cmix", "emb", "head"}));
  auto labels = [&](const std::string& name) {
    std::vector<std::string> v;
    for (const CalibrationCandidate& c : group(r, name).candidates) v.push_back(c.label());
    return v;
  };
  // IN = 256: rtn@4 (4 + 16/256 bits) is cheapest; sb6 with the AW mode (stats cover proj).
  EXPECT_EQ(labels("proj"),
            (std::vector<std::string>{
                "rtn@4", "sb6@4 asym_sb6", "sb6@4 asym_sb6_search", "sb6@4 asym_sb6_aw",
                "sb6@5 asym_sb6", "sb6@5 asym_sb6_search", "sb6@5 asym_sb6_aw", "sb6@6 asym_sb6",
                "sb6@6 asym_sb6_search", "sb6@6 asym_sb6_aw", "rtn@8", "asym@8 gs64"}));
  // No statistics for a gather: no AW candidate for emb.
  EXPECT_EQ(labels("emb").size(), 9u);
  // w1 [256, 96] is blocked along its 96 stored columns: no sb6, asym@8 fits.
  EXPECT_EQ(labels("w_lora"), (std::vector<std::string>{"rtn@4", "rtn@8", "asym@8 gs64"}));
  EXPECT_EQ(labels("a_lora"), (std::vector<std::string>{"rtn@4", "rtn@8"}));
  // k_k / k_a are [1, 1, C]: rtn@8 only.
  EXPECT_EQ(labels("small"), (std::vector<std::string>{"rtn@8"}));
  EXPECT_EQ(group(r, "small").tensors.size(), 6u);  // k_k, k_a, r_k of 2 blocks
  // A loose budget takes every group's cheapest candidate.
  for (const CalibrationGroup& g : r.groups) {
    EXPECT_EQ(g.final_choice, 0) << g.group;
    EXPECT_GE(g.candidates[0].metric, 0.0) << g.group;
  }
  expect_isolation_rule(r);
  EXPECT_EQ(r.evaluations, 1 + static_cast<int64_t>(r.groups.size()));
}

TEST(Calibrate, TighterBudgetsPickWiderSchemes) {
  const auto w = windows(64, 1);
  CalibrateOptions o;
  o.composite = false;
  o.max_kl = std::numeric_limits<double>::max();
  const CalibrationResult loose = calibrate(dense(), w, o);
  // A budget in the middle of the cheapest candidates' numbers, then zero.
  std::vector<double> first;
  for (const CalibrationGroup& g : loose.groups) first.push_back(g.candidates[0].metric);
  std::sort(first.begin(), first.end());
  o.max_kl = first[first.size() / 2];
  const CalibrationResult mid = calibrate(dense(), w, o);
  o.max_kl = 0;
  const CalibrationResult tight = calibrate(dense(), w, o);
  expect_isolation_rule(loose);
  expect_isolation_rule(mid);
  expect_isolation_rule(tight);
  bool mid_wider = false;
  for (size_t i = 0; i < loose.groups.size(); ++i) {
    SCOPED_TRACE(loose.groups[i].group);
    EXPECT_LE(chosen_cost(loose.groups[i]), chosen_cost(mid.groups[i]));
    EXPECT_LE(chosen_cost(mid.groups[i]), chosen_cost(tight.groups[i]));
    mid_wider = mid_wider || chosen_cost(mid.groups[i]) > chosen_cost(loose.groups[i]);
    // Same measurements for the candidates both runs measured (deterministic).
    for (size_t k = 0; k < loose.groups[i].candidates.size(); ++k) {
      if (loose.groups[i].candidates[k].measured && mid.groups[i].candidates[k].measured) {
        EXPECT_EQ(loose.groups[i].candidates[k].metric, mid.groups[i].candidates[k].metric) << k;
      }
    }
  }
  EXPECT_TRUE(mid_wider);
  // Budget 0: whatever was chosen measured exactly 0, everything else stays bf16.
  for (const CalibrationGroup& g : tight.groups) {
    if (g.final_choice >= 0) {
      EXPECT_EQ(g.candidates[static_cast<size_t>(g.final_choice)].metric, 0.0) << g.group;
    }
  }
  const quant::QuantConfig c = quant::QuantConfig::from_json(
      nlohmann::json::parse(tight.config_json), "tight");
  for (const CalibrationGroup& g : tight.groups)
    if (g.final_choice < 0) {
      EXPECT_EQ(c.bits_of(g.group), 16) << g.group;
    }
}

TEST(Calibrate, CompositePassAndTheConfigRoundTrip) {
  const auto dir = scratch_dir();
  const auto w = windows(64, 1);
  CalibrateOptions o;
  o.composite = false;
  o.max_kl = std::numeric_limits<double>::max();
  const CalibrationResult loose = calibrate(dense(), w, o);
  // Every group passes alone with its cheapest candidate, but all together are over the budget.
  double budget = 0;
  for (const CalibrationGroup& g : loose.groups) budget = std::max(budget, g.candidates[0].metric);
  o.max_kl = budget;
  o.composite = true;
  o.max_composite_steps = 4;
  o.work_dir = dir.string();
  const CalibrationResult r = calibrate(dense(), w, o);
  expect_isolation_rule(r);
  ASSERT_TRUE(r.composite_run);
  EXPECT_GT(r.composite_initial, budget);
  EXPECT_LE(r.steps.size(), 4u);
  EXPECT_LE(r.composite_final, r.composite_initial);
  double current = r.composite_initial;
  for (const CalibrationStep& s : r.steps) {
    EXPECT_EQ(s.before, current);
    EXPECT_EQ(s.kept, s.after < s.before);
    if (s.kept) current = s.after;
  }
  EXPECT_EQ(current, r.composite_final);
  // Every final choice was measured alone (upgrades after they were kept).
  for (const CalibrationGroup& g : r.groups) {
    if (g.final_choice < 0) continue;
    const CalibrationCandidate& ch = g.candidates[static_cast<size_t>(g.final_choice)];
    EXPECT_TRUE(ch.measured) << g.group;
    EXPECT_EQ(ch.from_composite, g.final_choice > g.isolated_choice) << g.group;
  }
  EXPECT_EQ(r.composite_within_budget, r.composite_final <= budget);
  // Temporary files are gone.
  EXPECT_TRUE(std::filesystem::is_empty(dir));

  // The file: the config loads, `wick quantize --config` writes what was chosen, and its KL to
  // the all-dense file is the composite pass's final number.
  const std::string cfg = (dir / "calib.json").string();
  save_calibration(cfg, r);
  const nlohmann::json j = nlohmann::json::parse(read_file(cfg));
  ASSERT_TRUE(j.contains("calibration_report"));
  const quant::QuantConfig c = quant::QuantConfig::from_json(j.at("config"), cfg);
  EXPECT_EQ(j.at("calibration_report").at("groups").size(), r.groups.size());
  QuantizeOptions qo;
  qo.config_path = cfg;
  const std::string out = (dir / "calibrated.rwkvq").string();
  quantize(dense(), out, qo);
  const quant::RwkvqFile file = quant::RwkvqFile::open(io::MappedFile::open(out));
  for (const CalibrationGroup& g : r.groups) {
    for (const std::string& key : g.tensors) {
      const quant::QuantTensor* t = file.find(key);
      ASSERT_NE(t, nullptr) << key;
      if (g.final_choice < 0) {
        EXPECT_EQ(t->layout, quant::Layout::kDense) << key;
      } else {
        const CalibrationCandidate& ch = g.candidates[static_cast<size_t>(g.final_choice)];
        EXPECT_EQ(std::string(quant::layout_name(t->layout)), ch.layout) << key;
        EXPECT_EQ(t->bits, ch.bits) << key;
        EXPECT_EQ(c.bits_of(g.group), ch.bits) << key;
      }
    }
  }
  const std::string ref = (dir / "dense.rwkvq").string();
  {
    nlohmann::json all = {{"bits", nlohmann::json::object()}};
    for (const std::string& g : quant::quant_groups()) all["bits"][g] = 16;
    write_file(dir / "dense.json", all.dump());
    QuantizeOptions d;
    d.config_path = (dir / "dense.json").string();
    quantize(dense(), ref, d);
  }
  KlOptions ko;
  ko.bootstrap_resamples = 10;
  const KlResult kl = kl_divergence(Model::load(ref), Model::load(out), w, ko);
  EXPECT_EQ(kl.mean_kl, r.composite_final);
}

TEST(Calibrate, PerplexityMetric) {
  CalibrateOptions o;
  o.metric = CalibrationMetric::kPpl;
  o.ppl_threshold_pct = 1e9;
  o.composite = false;
  const auto w = windows(64, 1);
  const CalibrationResult r = calibrate(dense(), w, o);
  const double ref = perplexity(Model::load(dense()), w).ppl;
  EXPECT_NEAR(r.reference_ppl, ref, 1e-6 * ref);  // the source is bf16: same weights
  for (const CalibrationGroup& g : r.groups) {
    const CalibrationCandidate& c = g.candidates[0];
    EXPECT_NEAR(c.metric, 100.0 * (c.ppl - r.reference_ppl) / r.reference_ppl, 1e-9) << g.group;
    EXPECT_EQ(g.final_choice, 0) << g.group;
  }
  const nlohmann::json j = nlohmann::json::parse(r.to_json_text());
  EXPECT_EQ(j.at("calibration_report").at("metric"), "ppl");
}

TEST(Calibrate, Refusals) {
  CalibrateOptions o;
  EXPECT_THROW(calibrate(dense(), {}, o), InputError);
  const std::vector<std::vector<int32_t>> one = {{1}};
  EXPECT_THROW(calibrate(dense(), one, o), InputError);
  o.max_kl = -1;
  EXPECT_THROW(calibrate(dense(), windows(64, 1), o), InputError);
  o.max_kl = 0.01;
  EXPECT_THROW(calibrate(fixture("rwkvq/tiny_reduction.rwkvq"), windows(64, 1), o),
               CheckpointError);
  const std::vector<std::vector<int32_t>> bad = {{1, 999}};
  EXPECT_THROW(calibrate(dense(), bad, o), InputError);
}

}  // namespace
}  // namespace wick::test
