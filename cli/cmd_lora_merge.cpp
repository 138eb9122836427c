// wick lora-merge --model M --lora F [--lora-alpha A] [--lora-scale S] --out OUT.safetensors
// Writes the dense checkpoint M with the LoRA adapter F merged (wick/lora.h merge_lora):
// W += scale·B·A in fp32, stored in each matrix's dtype; the adapter's LayerNorms replace the
// base's; every other tensor is copied unchanged. Prints one summary line on stdout.
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>

#include "commands.h"
#include "common.h"
#include "wick/errors.h"
#include "wick/lora.h"

namespace wick::cli {
namespace {

struct LoraMergeOptions {
  std::string model, lora, out, quantize;
  std::optional<double> alpha;
  double scale = 1.0;
  bool force = false;
};

void run_lora_merge(const LoraMergeOptions& o) {
  namespace fs = std::filesystem;
  if (o.quantize == "int8") {
    throw InputError(
        "wick lora-merge writes a dense checkpoint and --quantize int8 is applied at load; merge "
        "into the dense model first, then run the merged file with --quantize int8 (or apply the "
        "adapter at run time: --lora with --quantize int8)");
  }
  std::error_code ec;
  if (fs::exists(o.out, ec)) {
    std::error_code eq_ec;
    if (fs::equivalent(o.model, o.out, eq_ec) || fs::equivalent(o.lora, o.out, eq_ec))
      throw InputError("wick lora-merge: the output " + o.out +
                       " is one of the inputs; give another output path");
    if (!o.force)
      throw InputError("wick lora-merge: " + o.out +
                       " already exists; pass --force to overwrite it, or choose another path");
  }
  LoadOptions unpacked;  // only its geometry and container are read
  unpacked.pack_weights = false;
  const Model base = Model::load(o.model, unpacked);
  if (base.info().container.rfind("rwkvq", 0) == 0) {
    throw CheckpointError(o.model,
                          "is a packed .rwkvq model; lora-merge needs the dense checkpoint "
                          "(fp32/fp16/bf16) it was quantised from. Merge into that, then "
                          "quantise the merged file, or apply the adapter at run time (--lora)");
  }
  const auto adapter = LoraAdapter::load(o.lora, base, LoraOptions{o.alpha, o.scale});
  const LoraMergeSummary s = merge_lora(o.model, *adapter, o.out);
  fmt::print(
      "wrote {}: {} tensors, {} matrices merged (W += {}·B·A), {} norms replaced, {} "
      "bytes\n",
      o.out, s.tensors, s.merged, adapter->scale(), s.replaced, s.file_bytes);
}

}  // namespace

void register_lora_merge(CLI::App& app) {
  auto o = std::make_shared<LoraMergeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "lora-merge",
      "Merge a LoRA adapter into a dense checkpoint: W += (alpha/r)·B·A in fp32, stored in the "
      "base dtype; the adapter's LayerNorms replace the base's (writes safetensors)");
  cmd->add_option("--model", o->model, "dense base checkpoint (safetensors, .pth or HF folder)")
      ->required();
  cmd->add_option("--lora", o->lora, "LoRA adapter (.pth or .safetensors)")->required();
  cmd->add_option_function<double>(
      "--lora-alpha", [o](const double& a) { o->alpha = a; },
      "alpha the adapter was trained with (required unless the file was written by wick)");
  cmd->add_option("--lora-scale", o->scale, "extra multiplier of B·A (default 1)");
  cmd->add_option("--out", o->out, "output .safetensors file")->required();
  cmd->add_option("--quantize", o->quantize,
                  "refused for int8: merging needs dense weights (merge, then load with "
                  "--quantize int8)")
      ->check(CLI::IsMember({"none", "int8"}));
  cmd->add_flag("--force", o->force, "overwrite an existing output file");
  cmd->callback([o] { run_lora_merge(*o); });
}

}  // namespace wick::cli
