// wick quantize IN OUT --plain --layout sb6:4|sb6:5|sb6:6|sym:8|sym:6 [--tokenizer REF]
// Writes a `.rwkvq` file from a dense checkpoint with the plain (non-search) encoders
// (include/wick/quantize.h): for test and benchmark files. rwkv-quant's presets (reduction,
// compression: activation-weighted search) are not implemented yet, so --plain is required.
// Prints one summary line on stdout; fallback notes go to stderr.
#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "commands.h"
#include "wick/errors.h"
#include "wick/quantize.h"

namespace wick::cli {
namespace {

struct QuantizeOptions {
  std::string in, out;
  bool plain = false;
  std::string layout;
  std::string preset;
  std::string tokenizer;
};

void run_quantize(const QuantizeOptions& o) {
  if (!o.plain) {
    throw InputError(
        "wick quantize: the presets (--preset reduction|compression, activation-weighted "
        "search) are not implemented yet; pass --plain --layout sb6:4|sb6:5|sb6:6|sym:8|sym:6 "
        "to write a file with the plain encoders");
  }
  if (!o.preset.empty()) {
    throw InputError("wick quantize: --preset cannot be combined with --plain");
  }
  if (o.layout.empty()) {
    throw InputError("wick quantize --plain needs --layout sb6:4|sb6:5|sb6:6|sym:8|sym:6");
  }
  std::optional<std::string> tokenizer;
  if (!o.tokenizer.empty()) tokenizer = o.tokenizer;
  const QuantizeSummary s = quantize_plain(o.in, o.out, o.layout, tokenizer);
  for (const std::string& note : s.notes) std::cerr << "note: " << note << "\n";
  std::string per_layout;
  for (const auto& [label, n] : s.tensors_per_layout) {
    per_layout += (per_layout.empty() ? "" : ", ") + fmt::format("{} {}", label, n);
  }
  std::cout << fmt::format(
      "wrote {}: {} tensors ({}), {} bytes; projections {} at {:.4f} bits/weight\n", o.out,
      s.tensors, per_layout, s.file_bytes, s.layout, s.layout_bits_per_weight());
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a .rwkvq file from a dense checkpoint. Only --plain is implemented: the r/k/v/o "
      "projections, FFN key/value and head take --layout (plain encoders, no search); emb is "
      "sb6@5 (search), w/a/v LoRA asym@6, g LoRA rtn@8, the rest dense bf16");
  cmd->add_option("input", o->in, "Dense checkpoint: .safetensors, official .pth, or a folder "
                                  "with model.safetensors")
      ->required();
  cmd->add_option("output", o->out, "Output .rwkvq file (written atomically)")->required();
  cmd->add_flag("--plain", o->plain, "Use the plain (non-search) encoders (required for now)");
  cmd->add_option("--layout", o->layout,
                  "Layout of the projections, FFN and head: sb6:4, sb6:5, sb6:6, sym:8, sym:6");
  cmd->add_option("--preset", o->preset,
                  "reduction or compression (rwkv-quant presets; not implemented yet)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "Free-form tokenizer reference stored in the manifest (default: null)");
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace wick::cli
