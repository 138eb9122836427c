// `wick calibrate` (docs/rwkvq-format.md §3.8): per-group scheme search by single-group ablation,
// measured on files written by the one writer (quant::quantize_checkpoint). See
// include/wick/calibrate.h.
#include "wick/calibrate.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "quant/quant_config.h"
#include "quant/rwkvq.h"
#include "tasks/quantize_file.h"
#include "wick/act_stats.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/perplexity.h"

namespace wick {
namespace {

namespace fs = std::filesystem;
using quant::QuantConfig;

// A folder of our own for the temporary files, removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& parent) {
    std::error_code ec;
    const fs::path base = parent.empty() ? fs::temp_directory_path(ec) : fs::path(parent);
    if (ec) throw FileError("<temp>", "no temporary directory: " + ec.message());
    std::string tmpl = (base / "wick-calibrate-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw FileError(base.string(),
                      "cannot create a temporary folder for the calibration "
                      "files (--work-dir sets where)");
    }
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Every group at 16 bits: what "all other groups dense bf16" means in a config.
QuantConfig all_dense() {
  QuantConfig c;
  for (const std::string& g : quant::quant_groups()) c.bits[g] = 16;
  return c;
}

// `config` with `group` set to `cand` (or to 16 bits when null).
void apply(QuantConfig& config, const std::string& group, const CalibrationCandidate* cand) {
  config.group_scale.erase(group);
  config.group_scale_mode.erase(group);
  if (!cand) {
    config.bits[group] = 16;
    return;
  }
  config.bits[group] = cand->bits;
  if (cand->layout != "rtn") {
    config.group_scale[group] = cand->group_scale;
    config.group_scale_mode[group] = cand->mode;
  }
}

CalibrationCandidate candidate(const std::string& layout, int bits, const std::string& mode, int gs,
                               double cost) {
  CalibrationCandidate c;
  c.layout = layout;
  c.bits = bits;
  c.mode = mode;
  c.group_scale = gs;
  c.cost_bits = cost;
  return c;
}

// §3.8 step 2 (schema_space.candidates_for), over the tensors the writer quantises.
std::vector<CalibrationCandidate> candidates_for(const CalibrationGroup& g,
                                                 const std::vector<std::vector<int64_t>>& shapes,
                                                 bool aw) {
  bool all_2d = true;
  for (const auto& s : shapes) all_2d = all_2d && s.size() == 2;
  std::vector<CalibrationCandidate> v;
  if (!all_2d) {
    v.push_back(candidate("rtn", 8, "rtn", 0, 8.0 + 16.0 / std::max<int64_t>(g.min_in, 1)));
    return v;
  }
  const int64_t in = g.min_in;
  if (in % 256 == 0) {
    for (int bits : {4, 5, 6}) {
      std::vector<std::string> modes = {"asym_sb6", "asym_sb6_search"};
      if (aw) modes.push_back("asym_sb6_aw");
      for (const std::string& m : modes) v.push_back(candidate("sb6", bits, m, 32, bits + 0.5));
    }
  }
  if (in >= 64) v.push_back(candidate("asym", 8, "asym", 64, 9.0));
  for (int bits : {8, 4})
    v.push_back(candidate("rtn", bits, "rtn", 0, bits + 16.0 / static_cast<double>(in)));
  std::stable_sort(v.begin(), v.end(),
                   [](const CalibrationCandidate& a, const CalibrationCandidate& b) {
                     if (a.cost_bits != b.cost_bits) return a.cost_bits < b.cost_bits;
                     const bool ra = a.layout == "rtn", rb = b.layout == "rtn";
                     if (ra != rb) return !ra;
                     return a.bits > b.bits;
                   });
  return v;
}

struct Measurement {
  double metric = 0;
  double kl = 0, kl_low = 0, kl_high = 0;
  double ppl = 0;
};

class Calibrator {
 public:
  Calibrator(const std::string& model_path, std::span<const std::vector<int32_t>> windows,
             const CalibrateOptions& options)
      : model_path_(model_path), windows_(windows), options_(options), scratch_(options.work_dir) {
    if (!options.act_stats_path.empty()) stats_ = load_act_stats(options.act_stats_path);
  }

  // Writes `config` into a temporary file and returns its path.
  std::string write(const QuantConfig& config, CalibrationResult& result) {
    const std::string path =
        (scratch_.path() / fmt::format("candidate-{}.rwkvq", counter_++)).string();
    quant::FileQuantizeOptions o;
    o.config = config;
    o.config.act_stats_path = options_.act_stats_path;
    if (stats_) o.stats = *stats_;
    o.label = "calibration candidate";
    const QuantizeSummary s = quant::quantize_checkpoint(model_path_, path, o);
    for (const std::string& w : s.warnings) add_warning(result, w);
    for (const std::string& n : s.notes) add_warning(result, n);
    return path;
  }

  // Writes the all-dense reference and returns the quantisable tensors per group.
  void prepare(CalibrationResult& result) {
    const std::string path = write(all_dense(), result);
    reference_.emplace(Model::load(path));
    auto file = quant::RwkvqFile::open(io::MappedFile::open(path));
    if (options_.metric == CalibrationMetric::kPpl) {
      reference_ppl_ = perplexity(*reference_, windows_).ppl;
      result.reference_ppl = reference_ppl_;
    }
    result.evaluations += 1;
    for (const std::string& group : quant::quant_groups()) {
      CalibrationGroup g;
      g.group = group;
      // A tensor is quantised when the plan of an rtn@8 config says so (not < 2-D, no LoRA bias).
      QuantConfig probe = all_dense();
      probe.bits[group] = 8;
      std::vector<std::vector<int64_t>> shapes;
      bool stats_cover = stats_.has_value();
      int64_t min_in = std::numeric_limits<int64_t>::max();
      for (const quant::QuantTensor& t : file.tensors()) {
        if (quant::tensor_group(t.key) != group) continue;
        const quant::TensorPlan plan = quant::plan_tensor(t.key, t.shape, probe, nullptr, 0);
        if (plan.layout == quant::Layout::kDense) continue;
        g.tensors.push_back(t.key);
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        g.weights += n;
        const int64_t in = t.shape.empty() ? 0 : n / t.shape[0];
        min_in = std::min(min_in, in);
        shapes.push_back(t.shape);
        if (stats_cover) {
          auto it = stats_->find(t.key);
          stats_cover = it != stats_->end() && static_cast<int64_t>(it->second.size()) == in;
        }
      }
      if (g.tensors.empty()) continue;
      g.min_in = min_in;
      g.candidates = candidates_for(g, shapes, stats_cover);
      result.groups.push_back(std::move(g));
    }
    std::error_code ec;
    fs::remove(path, ec);  // the mapping stays valid while the reference model holds it
  }

  Measurement measure(const QuantConfig& config, CalibrationResult& result) {
    const std::string path = write(config, result);
    Measurement m;
    {
      const Model model = Model::load(path);
      if (options_.metric == CalibrationMetric::kKl) {
        KlOptions ko;
        ko.bootstrap_resamples = 2000;
        const KlResult r = kl_divergence(*reference_, model, windows_, ko);
        m.kl = r.mean_kl;
        m.kl_low = r.ci_low;
        m.kl_high = r.ci_high;
        m.metric = r.mean_kl;
        result.positions = r.positions;
      } else {
        const PerplexityResult r = perplexity(model, windows_);
        m.ppl = r.ppl;
        m.metric = 100.0 * (r.ppl - reference_ppl_) / reference_ppl_;
        result.positions = r.tokens_scored;
      }
    }
    std::error_code ec;
    fs::remove(path, ec);
    result.evaluations += 1;
    return m;
  }

 private:
  static void add_warning(CalibrationResult& result, const std::string& w) {
    if (std::find(result.warnings.begin(), result.warnings.end(), w) == result.warnings.end())
      result.warnings.push_back(w);
  }

  std::string model_path_;
  std::span<const std::vector<int32_t>> windows_;
  CalibrateOptions options_;
  ScratchDir scratch_;
  std::optional<ActStats> stats_;
  std::optional<Model> reference_;
  double reference_ppl_ = 0;
  int counter_ = 0;
};

const CalibrationCandidate* chosen(const CalibrationGroup& g, int index) {
  return index < 0 ? nullptr : &g.candidates[static_cast<size_t>(index)];
}

QuantConfig config_of(const std::vector<CalibrationGroup>& groups, bool final_choice) {
  QuantConfig c = all_dense();
  for (const CalibrationGroup& g : groups)
    apply(c, g.group, chosen(g, final_choice ? g.final_choice : g.isolated_choice));
  return c;
}

// The next candidate of strictly higher cost after `index`, or -1 (dense bf16).
int next_candidate(const CalibrationGroup& g, int index) {
  const double cost = g.candidates[static_cast<size_t>(index)].cost_bits;
  for (size_t i = static_cast<size_t>(index) + 1; i < g.candidates.size(); ++i)
    if (g.candidates[i].cost_bits > cost) return static_cast<int>(i);
  return -1;
}

void check_options(std::span<const std::vector<int32_t>> windows, const CalibrateOptions& o) {
  if (windows.empty()) throw InputError("calibrate: no window to measure on");
  for (size_t i = 0; i < windows.size(); ++i) {
    if (windows[i].size() < 2) {
      throw InputError("calibrate: window " + std::to_string(i) + " has " +
                       std::to_string(windows[i].size()) + " tokens; each needs at least 2");
    }
  }
  const double budget = o.metric == CalibrationMetric::kKl ? o.max_kl : o.ppl_threshold_pct;
  if (!(budget >= 0) || !std::isfinite(budget)) {
    throw InputError(fmt::format("calibrate: the budget ({} = {}) must be a finite number >= 0",
                                 o.metric == CalibrationMetric::kKl ? "max KL" : "ppl threshold %",
                                 budget));
  }
  if (o.max_composite_steps < 0) throw InputError("calibrate: max_composite_steps must be >= 0");
}

}  // namespace

std::string CalibrationCandidate::label() const {
  if (layout == "sb6") return fmt::format("sb6@{} {}", bits, mode);
  if (layout == "asym") return fmt::format("asym@{} gs{}", bits, group_scale);
  return fmt::format("{}@{}", layout, bits);
}

std::string CalibrationGroup::choice_label() const {
  return final_choice < 0 ? "bf16" : candidates[static_cast<size_t>(final_choice)].label();
}

CalibrationResult calibrate(const std::string& model_path,
                            std::span<const std::vector<int32_t>> windows,
                            const CalibrateOptions& options, const CalibrationProgress& progress) {
  check_options(windows, options);
  CalibrationResult result;
  result.metric = options.metric;
  result.budget =
      options.metric == CalibrationMetric::kKl ? options.max_kl : options.ppl_threshold_pct;
  result.windows = static_cast<int64_t>(windows.size());
  Calibrator cal(model_path, windows, options);
  cal.prepare(result);

  // A candidate measured alone: every other group dense.
  auto measure_alone = [&](const CalibrationGroup& g, CalibrationCandidate& c) {
    QuantConfig config = all_dense();
    apply(config, g.group, &c);
    const Measurement m = cal.measure(config, result);
    c.measured = true;
    c.metric = m.metric;
    c.kl = m.kl;
    c.kl_ci_low = m.kl_low;
    c.kl_ci_high = m.kl_high;
    c.ppl = m.ppl;
    c.within_budget = m.metric <= result.budget;
  };

  // 1. Isolation: cheapest candidate within the budget, every other group dense.
  int64_t total = 0, done = 0;
  for (const CalibrationGroup& g : result.groups)
    total += static_cast<int64_t>(g.candidates.size());
  if (progress) progress("isolation", 0, total);
  for (CalibrationGroup& g : result.groups) {
    for (size_t i = 0; i < g.candidates.size(); ++i) {
      CalibrationCandidate& c = g.candidates[i];
      measure_alone(g, c);
      ++done;
      if (progress) progress("isolation", done, total);
      if (c.within_budget) {
        g.isolated_choice = static_cast<int>(i);
        break;
      }
    }
    done +=
        static_cast<int64_t>(g.candidates.size()) -
        (g.isolated_choice < 0 ? static_cast<int64_t>(g.candidates.size()) : g.isolated_choice + 1);
    if (progress) progress("isolation", done, total);
    g.final_choice = g.isolated_choice;
  }

  // 2. Composite: all choices together; upgrade the worst group per added bit while over budget.
  bool any = false;
  for (const CalibrationGroup& g : result.groups) any = any || g.isolated_choice >= 0;
  if (options.composite && any) {
    const int64_t steps_total = 1 + 2 * static_cast<int64_t>(options.max_composite_steps);
    int64_t steps_done = 0;
    if (progress) progress("composite", 0, steps_total);
    double current = cal.measure(config_of(result.groups, true), result).metric;
    if (progress) progress("composite", ++steps_done, steps_total);
    result.composite_run = true;
    result.composite_initial = current;
    std::set<std::string> frozen;
    for (int step = 0; step < options.max_composite_steps && current > result.budget; ++step) {
      CalibrationGroup* best = nullptr;
      int best_next = -1;
      double best_priority = -1;
      for (CalibrationGroup& g : result.groups) {
        if (g.final_choice < 0 || frozen.count(g.group)) continue;
        const CalibrationCandidate& cur = g.candidates[static_cast<size_t>(g.final_choice)];
        const int next = next_candidate(g, g.final_choice);
        const double next_cost =
            next < 0 ? 16.0 : g.candidates[static_cast<size_t>(next)].cost_bits;
        const double added = std::max(next_cost - cur.cost_bits, 1e-9);
        // Every current choice was measured alone (kept upgrades are measured below).
        const double harm = std::max(cur.metric, 0.0);
        const double priority = harm / added;
        if (priority > best_priority) {
          best_priority = priority;
          best = &g;
          best_next = next;
        }
      }
      if (!best) break;
      const int previous = best->final_choice;
      best->final_choice = best_next;
      const double after = cal.measure(config_of(result.groups, true), result).metric;
      if (progress) progress("composite", ++steps_done, steps_total);
      CalibrationStep s;
      s.group = best->group;
      s.from = chosen(*best, previous) ? chosen(*best, previous)->label() : "bf16";
      s.to = best_next < 0 ? "bf16" : best->candidates[static_cast<size_t>(best_next)].label();
      s.before = current;
      s.after = after;
      s.kept = after < current;
      if (s.kept) {
        current = after;
        if (best_next >= 0 && !best->candidates[static_cast<size_t>(best_next)].measured) {
          CalibrationCandidate& c = best->candidates[static_cast<size_t>(best_next)];
          measure_alone(*best, c);
          c.from_composite = true;
          if (progress) progress("composite", ++steps_done, steps_total);
        }
      } else {
        best->final_choice = previous;
        frozen.insert(best->group);
      }
      result.steps.push_back(s);
    }
    result.composite_final = current;
    result.composite_within_budget = current <= result.budget;
    if (progress) progress("composite", steps_total, steps_total);
  }

  QuantConfig final_config = config_of(result.groups, true);
  final_config.act_stats_path = options.act_stats_path;
  result.config_json = final_config.to_json().dump(2);
  return result;
}

std::string CalibrationResult::to_json_text() const {
  using oj = nlohmann::ordered_json;
  oj report = oj::object();
  report["metric"] = metric == CalibrationMetric::kKl ? "kl" : "ppl";
  report["unit"] = metric == CalibrationMetric::kKl ? "nats/token" : "percent";
  report["budget"] = budget;
  if (metric == CalibrationMetric::kPpl) report["reference_ppl"] = reference_ppl;
  report["windows"] = windows;
  report["positions"] = positions;
  report["evaluations"] = evaluations;
  report["note"] =
      "isolation pass: each group measured alone with every other group dense bf16 (interactions "
      "between groups are ignored there); the composite pass measures the choices together";
  oj groups_j = oj::array();
  for (const CalibrationGroup& g : groups) {
    oj gj = oj::object();
    gj["group"] = g.group;
    gj["tensors"] = g.tensors.size();
    gj["weights"] = g.weights;
    gj["min_in"] = g.min_in;
    gj["isolated_choice"] = g.isolated_choice < 0
                                ? "bf16"
                                : g.candidates[static_cast<size_t>(g.isolated_choice)].label();
    gj["choice"] = g.choice_label();
    oj cands = oj::array();
    for (const CalibrationCandidate& c : g.candidates) {
      oj cj = oj::object();
      cj["scheme"] = c.label();
      cj["cost_bits"] = c.cost_bits;
      cj["measured"] = c.measured;
      if (c.from_composite) cj["measured_after_composite_upgrade"] = true;
      if (c.measured) {
        cj["metric"] = c.metric;
        if (metric == CalibrationMetric::kKl) {
          cj["kl_ci"] = {c.kl_ci_low, c.kl_ci_high};
        } else {
          cj["ppl"] = c.ppl;
        }
        cj["within_budget"] = c.within_budget;
      }
      cands.push_back(cj);
    }
    gj["candidates"] = cands;
    groups_j.push_back(gj);
  }
  report["groups"] = groups_j;
  if (composite_run) {
    oj comp = oj::object();
    comp["initial"] = composite_initial;
    comp["final"] = composite_final;
    comp["within_budget"] = composite_within_budget;
    oj steps_j = oj::array();
    for (const CalibrationStep& s : steps) {
      steps_j.push_back({{"group", s.group},
                         {"from", s.from},
                         {"to", s.to},
                         {"before", s.before},
                         {"after", s.after},
                         {"kept", s.kept}});
    }
    comp["steps"] = steps_j;
    report["composite"] = comp;
  }
  report["warnings"] = warnings;
  oj root = oj::object();
  root["config"] = oj::parse(config_json);
  root["calibration_report"] = report;
  return root.dump(2) + "\n";
}

void save_calibration(const std::string& path, const CalibrationResult& result) {
  const std::string text = result.to_json_text();
  io::AtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace wick
