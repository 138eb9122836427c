// wick calibrate --model M --text FILE --out config.json [--max-kl X | --ppl-threshold-pct P]
//                [--act-stats FILE] [--ctx 512] [--max-windows N] [--no-composite]
//                [--max-composite-steps 20] [--work-dir DIR] [--tokenizer T]
// Per-group scheme search by single-group ablation (include/wick/calibrate.h,
// docs/rwkvq-format.md §3.8): each group quantised alone at each candidate scheme, cheapest
// first, measured against the all-dense model on the windows of a UTF-8 text (KL by default, or
// delta ppl); the cheapest within the budget wins, none -> the group stays bf16; then an optional
// composite pass. Writes {"config": ..., "calibration_report": ...} (`wick quantize --config`
// reads it) and prints a table of every candidate measured. Progress bars on a terminal.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "commands.h"
#include "common.h"
#include "evaluation_text.h"
#include "progress.h"
#include "wick/calibrate.h"
#include "wick/errors.h"

namespace wick::cli {
namespace {

struct CalibrateCliOptions {
  std::string model, text, out, tokenizer, act_stats, work_dir;
  int ctx = 512;
  int64_t max_windows = 0;
  double max_kl = -1;             // -1: not given
  double ppl_threshold_pct = -1;  // -1: not given
  bool no_composite = false;
  int max_composite_steps = 20;
};

std::string table(const CalibrationResult& r) {
  const bool kl = r.metric == CalibrationMetric::kKl;
  std::string out = fmt::format("{:<8} {:<24} {:>6}  {:>12}  {}\n", "group", "candidate", "bits/w",
                                kl ? "KL nats/tok" : "delta ppl %", "");
  for (const CalibrationGroup& g : r.groups) {
    bool first = true;
    for (size_t i = 0; i < g.candidates.size(); ++i) {
      const CalibrationCandidate& c = g.candidates[i];
      if (!c.measured) continue;
      std::string mark = c.within_budget ? "ok" : "over";
      if (c.from_composite) mark += " (measured after a composite upgrade)";
      if (static_cast<int>(i) == g.final_choice) {
        mark += g.final_choice == g.isolated_choice ? "  <- chosen"
                                                    : "  <- chosen by the composite pass";
      }
      out += fmt::format("{:<8} {:<24} {:>6.3f}  {:>12.6g}  {}\n", first ? g.group : "", c.label(),
                         c.cost_bits, c.metric, mark);
      first = false;
    }
    if (g.final_choice < 0) {
      out += fmt::format("{:<8} {:<24} {:>6}  {:>12}  {}\n", first ? g.group : "", "bf16", "16",
                         "0", "<- chosen (no candidate within the budget)");
    } else if (g.final_choice != g.isolated_choice &&
               !g.candidates[static_cast<size_t>(g.final_choice)].measured) {
      out += fmt::format("{:<8} {:<24} {:>6.3f}  {:>12}  {}\n", "", g.choice_label(),
                         g.candidates[static_cast<size_t>(g.final_choice)].cost_bits, "-",
                         "<- chosen");
    }
  }
  return out;
}

void run_calibrate(const CalibrateCliOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  CalibrateOptions co;
  if (o.max_kl >= 0 && o.ppl_threshold_pct >= 0) {
    throw InputError(
        "wick calibrate: give one budget: --max-kl (KL, nats/token) or "
        "--ppl-threshold-pct (delta perplexity, %)");
  }
  if (o.ppl_threshold_pct >= 0) {
    co.metric = CalibrationMetric::kPpl;
    co.ppl_threshold_pct = o.ppl_threshold_pct;
  } else if (o.max_kl >= 0) {
    co.max_kl = o.max_kl;
  }
  co.act_stats_path = o.act_stats;
  co.composite = !o.no_composite;
  co.max_composite_steps = o.max_composite_steps;
  co.work_dir = o.work_dir;

  std::unique_ptr<EvaluationText> text;
  {
    // The dense model only picks the tokenizer and checks the ids; calibrate() loads its own.
    const Model model = open_model(o.model);
    auto tokenizer = tokenizer_for(model, o.tokenizer);
    text = std::make_unique<EvaluationText>(
        load_evaluation_text(o.text, *tokenizer, {o.ctx, o.max_windows}));
  }
  std::unique_ptr<ProgressBar> bar;
  std::string stage;
  const CalibrationResult r =
      calibrate(o.model, text->windows, co, [&](const std::string& s, int64_t done, int64_t total) {
        if (s != stage) {
          if (bar) bar->finish();
          stage = s;
          bar = std::make_unique<ProgressBar>("calibrate " + s, total, "model");
        }
        bar->update(done);
      });
  if (bar) bar->finish();
  save_calibration(o.out, r);

  const bool kl = r.metric == CalibrationMetric::kKl;
  std::string out = table(r);
  if (r.composite_run) {
    int kept = 0;
    for (const CalibrationStep& s : r.steps) kept += s.kept ? 1 : 0;
    out += fmt::format("composite: {:.6g} -> {:.6g} {} ({} of {} upgrades kept){}\n",
                       r.composite_initial, r.composite_final, kl ? "nats/token" : "%", kept,
                       r.steps.size(), r.composite_within_budget ? "" : "  OVER THE BUDGET");
  }
  out += fmt::format("wrote {}: budget {} {} over {} windows ({} positions), {} models measured\n",
                     o.out, r.budget, kl ? "nats/token (KL)" : "% (delta ppl)", r.windows,
                     r.positions, r.evaluations);
  std::cout << out;
  for (const std::string& w : r.warnings) std::cerr << "warning: " << w << "\n";
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << fmt::format(
      "[wick] the isolation pass measures each group alone (interactions between groups are only "
      "seen by the composite pass); quantise with `wick quantize {} OUT --config {}{}`; {:.2f} s\n",
      o.model, o.out, o.act_stats.empty() ? "" : " --act-stats " + o.act_stats, seconds);
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Choose a quantisation scheme per parameter group by measurement: each group quantised "
      "alone at each candidate (cheapest first) and compared with the dense model on a text; the "
      "cheapest within the budget wins (interactions between groups are only checked by the "
      "composite pass). Writes a config for `wick quantize --config`");
  cmd->add_option("-m,--model", o->model,
                  "Dense checkpoint (.safetensors, official .pth, or a folder with "
                  "model.safetensors)")
      ->required();
  cmd->add_option("--text", o->text, "UTF-8 calibration text file, tokenised whole")->required();
  cmd->add_option("-o,--out", o->out,
                  "Output JSON {\"config\": ..., \"calibration_report\": ...} (written atomically)")
      ->required();
  cmd->add_option("--max-kl", o->max_kl,
                  "Budget: KL(dense || quantised) in nats/token (default 0.01; the default metric)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ppl-threshold-pct", o->ppl_threshold_pct,
                  "Budget: perplexity increase in % of the dense model's (rwkv-quant's metric; "
                  "its default is 5); replaces KL as the metric")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--act-stats", o->act_stats,
                  "E[x^2] per input channel (wick act-stats): adds the activation-weighted sb6 "
                  "candidates; quantise with the same file afterwards");
  cmd->add_option("--ctx", o->ctx, "Tokens per window (default 512; the partial tail is dropped)");
  cmd->add_option("--max-windows", o->max_windows, "Use only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-composite", o->no_composite,
                "Skip the composite pass (keep the isolated choices)");
  cmd->add_option("--max-composite-steps", o->max_composite_steps,
                  "Upgrades the composite pass may try (default 20)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--work-dir", o->work_dir,
                  "Folder for the temporary .rwkvq files (default: the system temp folder; needs "
                  "about twice the dense bf16 model)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: "
                  "byte-level for 256-token models, the embedded World vocabulary for 65536");
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace wick::cli
