// wick quantize IN OUT --preset reduction|compression [--act-stats FILE] [--config FILE]
// wick quantize IN OUT --plain --layout sb6:4|sb6:5|sb6:6|sym:8|sym:6
// Writes a `.rwkvq` file from a dense checkpoint (include/wick/quantize.h): rwkv-quant's presets
// or a config file (activation-weighted when --act-stats is given), or one plain layout for test
// and benchmark files. Prints one summary line on stdout; fallback notes and warnings (AW modes
// run unweighted for want of statistics) go to stderr.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "progress.h"
#include "wick/errors.h"
#include "wick/quantize.h"

namespace wick::cli {
namespace {

struct QuantizeOptions {
  std::string in, out;
  bool plain = false;
  std::string layout;
  std::string preset;
  std::string config;
  std::string act_stats;
  std::string tokenizer;
  bool force = false;
};

// The output must not be the input (the dense model would be gone), must not replace an existing
// file unless --force, and should be named like what it holds.
void check_output(const QuantizeOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.out, ec)) {
    std::error_code eq_ec;
    if (fs::equivalent(o.in, o.out, eq_ec))
      throw InputError("wick quantize: the output " + o.out +
                       " is the input checkpoint itself; writing it would destroy the dense "
                       "model. Give another output path, such as model.rwkvq");
    if (!o.force)
      throw InputError("wick quantize: " + o.out +
                       " already exists; pass --force to overwrite it, or choose another path");
    if (fs::is_directory(o.out, ec))
      throw InputError("wick quantize: " + o.out + " is a folder; give a file path (model.rwkvq)");
  }
  const std::string ext = fs::path(o.out).extension().string();
  if (ext != ".rwkvq")
    std::cerr << "wick quantize: warning: " << o.out << " will hold a .rwkvq file, but its name "
              << (ext.empty() ? "has no extension" : "ends in '" + ext + "'")
              << "; other tools go by the name (use .rwkvq)\n";
}

void run_quantize(const QuantizeOptions& o) {
  check_output(o);
  std::optional<std::string> tokenizer;
  if (!o.tokenizer.empty()) tokenizer = o.tokenizer;
  QuantizeSummary s;
  // One bar over the tensors, drawn on a terminal only (cli/progress.h).
  std::unique_ptr<ProgressBar> bar;
  const ProgressFn progress = [&bar](int64_t done, int64_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("quantize", total, "tensor");
    bar->update(done);
    if (done == total) bar->finish();
  };
  if (o.plain) {
    if (!o.preset.empty() || !o.config.empty() || !o.act_stats.empty()) {
      throw InputError(
          "wick quantize: --plain writes one plain layout; it cannot be combined "
          "with --preset, --config or --act-stats");
    }
    if (o.layout.empty()) {
      throw InputError("wick quantize --plain needs --layout sb6:4|sb6:5|sb6:6|sym:8|sym:6");
    }
    s = quantize_plain(o.in, o.out, o.layout, tokenizer, progress);
  } else {
    if (!o.layout.empty()) {
      throw InputError(
          "wick quantize: --layout belongs to --plain; with a preset or --config "
          "the layouts come from the preset / config");
    }
    if (o.preset.empty() && o.config.empty()) {
      throw InputError(
          "wick quantize: choose --preset reduction|compression, --config FILE, or "
          "--plain --layout L");
    }
    wick::QuantizeOptions q;
    q.preset = o.preset;
    q.config_path = o.config;
    q.act_stats_path = o.act_stats;
    q.tokenizer = tokenizer;
    q.progress = progress;
    s = quantize(o.in, o.out, q);
  }
  for (const std::string& note : s.notes) std::cerr << "note: " << note << "\n";
  for (const std::string& w : s.warnings) std::cerr << "warning: " << w << "\n";
  std::string per_layout;
  for (const auto& [label, n] : s.tensors_per_layout) {
    per_layout += (per_layout.empty() ? "" : ", ") + fmt::format("{} {}", label, n);
  }
  std::cout << fmt::format(
      "wrote {}: {} tensors ({}), {} bytes; {}; projections, FFN and head at {:.4f} bits/weight; "
      "{} tensors activation-weighted\n",
      o.out, s.tensors, per_layout, s.file_bytes, s.layout, s.layout_bits_per_weight(),
      s.weighted_tensors);
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a .rwkvq file from a dense checkpoint: rwkv-quant's presets (--preset), a config "
      "file (--config), or one plain layout for the projections/FFN/head (--plain --layout)");
  cmd->add_option("input", o->in,
                  "Dense checkpoint: .safetensors, official .pth, or a folder "
                  "with model.safetensors")
      ->required();
  cmd->add_option("output", o->out, "Output .rwkvq file (written atomically)")->required();
  cmd->add_option("--preset", o->preset,
                  "reduction (sym 8/6-bit, near-lossless) or compression (sb6 5/4-bit, small)");
  cmd->add_option("--config", o->config,
                  "Quantisation config JSON (rwkv-quant's config object, as wick calibrate "
                  "writes it; a manifest's \"config\" works too)");
  cmd->add_option("--act-stats", o->act_stats,
                  "E[x^2] per input channel (safetensors, from wick act-stats) for the "
                  "activation-weighted modes; without it they run unweighted (a warning says so)");
  cmd->add_flag("--plain", o->plain, "Plain (non-search) encoders with one --layout");
  cmd->add_option("--layout", o->layout,
                  "With --plain: layout of the projections, FFN and head: sb6:4, sb6:5, sb6:6, "
                  "sym:8, sym:6");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Free-form tokenizer reference stored in the manifest (default: null)");
  cmd->add_flag("--force", o->force, "Overwrite an existing output file (never the input itself)");
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace wick::cli
