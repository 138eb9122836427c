// wick info --model PATH [--json]: geometry, dtypes, parameter count and file size.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"

namespace wick::cli {
namespace {

void run_info(const std::string& path, bool json) {
  Model model = load_model_or_default(path);
  const Geometry& g = model.geometry();
  const ModelInfo& i = model.info();
  const uint64_t state_bytes = model.new_state().bytes();
  if (json) {
    nlohmann::json j;
    j["source"] = i.source;
    j["container"] = i.container;
    j["naming"] = std::string(naming_convention_name(i.convention));
    j["file_bytes"] = i.file_bytes;
    j["parameters"] = i.parameters;
    j["weight_bytes"] = i.weight_bytes;
    j["state_bytes"] = state_bytes;
    nlohmann::json dt = nlohmann::json::object();
    for (auto& [d, n] : i.dtype_parameters) dt[std::string(dtype_name(d))] = n;
    j["dtypes"] = dt;
    if (!i.packed_parameters.empty()) {
      nlohmann::json lay = nlohmann::json::object();
      for (auto& [l, n] : i.packed_parameters) lay[l] = n;
      j["layouts"] = lay;
    }
    j["geometry"] = {{"n_layer", g.n_layer}, {"n_embd", g.n_embd},   {"n_head", g.n_head},
                     {"head_size", g.head_size}, {"ffn_dim", g.ffn_dim}, {"vocab", g.vocab},
                     {"lora_w", g.lora_w},   {"lora_a", g.lora_a},   {"lora_v", g.lora_v},
                     {"lora_g", g.lora_g}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::string dts;
  for (auto& [d, n] : i.dtype_parameters) dts += fmt::format("{}{} ({} params)", dts.empty() ? "" : ", ", dtype_name(d), n);
  std::string layouts;
  for (auto& [l, n] : i.packed_parameters)
    layouts += fmt::format("{}{} ({} params)", layouts.empty() ? "" : ", ", l, n);
  if (!layouts.empty()) dts += (dts.empty() ? "" : "; packed: ") + layouts;
  std::cout << fmt::format(
      "model      {}\n"
      "container  {} ({} naming)\n"
      "file size  {} bytes ({:.2f} MiB)\n"
      "parameters {} ({:.2f} M), {} bytes as stored\n"
      "dtypes     {}\n"
      "geometry   L={} C={} H={} N={} F={} V={}\n"
      "LoRA ranks decay={} in-context-rate={} value-residual={} gate={}\n"
      "state      {} bytes per sequence (fp32)\n",
      i.source, i.container, naming_convention_name(i.convention), i.file_bytes,
      i.file_bytes / 1048576.0, i.parameters, i.parameters / 1e6, i.weight_bytes, dts, g.n_layer,
      g.n_embd, g.n_head, g.head_size, g.ffn_dim, g.vocab, g.lora_w, g.lora_a, g.lora_v, g.lora_g,
      state_bytes);
}

}  // namespace

void register_info(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("info", "Print a checkpoint's geometry, dtypes and size");
  cmd->add_option("-m,--model", *path, "Checkpoint; default: the embedded tiny model");
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([path, json] { run_info(*path, *json); });
}

}  // namespace wick::cli
