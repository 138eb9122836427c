// wick info --model PATH [--json]: geometry, dtypes, parameter count and file size.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "wick/runtime.h"

namespace wick::cli {
namespace {

// "avx512 (dot avx512, int8 avx512-vnni, ...)": the level and each family's variant.
std::string kernels_line() {
  std::string s = std::string(kernel_isa()) + " (";
  bool first = true;
  for (const auto& [family, variant] : kernel_choices()) {
    s += (first ? "" : ", ") + family + " " + variant;
    first = false;
  }
  return s + ")";
}

void run_info(const std::string& path, const LoadOptions& load, bool json,
              const AttentionFlags& attention) {
  // Nothing is computed here: the weights are not packed (LoadOptions::pack_weights).
  LoadOptions unpacked = load;
  unpacked.pack_weights = false;
  Model model = with_attention_flags(load_model_or_default(path, unpacked), attention);
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
    j["quantization"] = std::string(weight_quantization_name(i.quantization));
    j["precision"] = std::string(precision_name(model.precision()));
    j["state_bytes"] = state_bytes;
    j["kernel_isa"] = kernel_isa();  // the instruction set the kernels run (WICK_ISA may lower it)
    nlohmann::json kc = nlohmann::json::object();
    for (const auto& [family, variant] : kernel_choices()) kc[family] = variant;
    j["kernels"] = kc;  // what each kernel family runs at that level
    nlohmann::json dt = nlohmann::json::object();
    for (auto& [d, n] : i.dtype_parameters) dt[std::string(dtype_name(d))] = n;
    j["dtypes"] = dt;
    if (!i.packed_parameters.empty()) {
      nlohmann::json lay = nlohmann::json::object();
      for (auto& [l, n] : i.packed_parameters) lay[l] = n;
      j["layouts"] = lay;
    }
    j["geometry"] = {{"n_layer", g.n_layer},     {"n_embd", g.n_embd},   {"n_head", g.n_head},
                     {"head_size", g.head_size}, {"ffn_dim", g.ffn_dim}, {"vocab", g.vocab},
                     {"lora_w", g.lora_w},       {"lora_a", g.lora_a},   {"lora_v", g.lora_v},
                     {"lora_g", g.lora_g}};
    j["architecture"] = i.architecture;
    if (!i.adapter.empty()) j["adapter"] = i.adapter;
    if (g.n_attn > 0) {
      const AttentionOptions& a = model.attention();
      j["geometry"]["n_attn"] = g.n_attn;
      j["geometry"]["attn_ffn_dim"] = g.attn_ffn_dim;
      j["attention"] = {{"mode", std::string(attention_mode_name(a.mode))},
                        {"moba_block", a.moba_block},
                        {"moba_topk", a.moba_topk},
                        {"moba_scope", std::string(moba_scope_name(a.moba_scope))},
                        {"moba_past", a.moba_past_k_minus_1 ? "K-1" : "K"},
                        {"kv_max", a.kv_max}};
      j["kv_bytes_per_token"] = 2 * g.n_attn * g.n_embd * sizeof(float);
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::string dts;
  for (auto& [d, n] : i.dtype_parameters)
    dts += fmt::format("{}{} ({} params)", dts.empty() ? "" : ", ", dtype_name(d), n);
  std::string layouts;
  for (auto& [l, n] : i.packed_parameters)
    layouts += fmt::format("{}{} ({} params)", layouts.empty() ? "" : ", ", l, n);
  if (!layouts.empty()) dts += (dts.empty() ? "" : "; packed: ") + layouts;
  if (!i.adapter.empty()) std::cout << fmt::format("adapter    LoRA {}\n", i.adapter);
  std::cout << fmt::format(
      "model      {}\n"
      "container  {} ({} naming)\n"
      "file size  {} bytes ({:.2f} MiB)\n"
      "parameters {} ({:.2f} M), {} bytes as stored\n"
      "dtypes     {}\n"
      "geometry   L={} C={} H={} N={} F={} V={}\n"
      "LoRA ranks decay={} in-context-rate={} value-residual={} gate={}\n"
      "state      {} bytes per sequence (fp32)\n"
      "kernels    {}\n{}",
      i.source, i.container, naming_convention_name(i.convention), i.file_bytes,
      i.file_bytes / 1048576.0, i.parameters, i.parameters / 1e6, i.weight_bytes, dts, g.n_layer,
      g.n_embd, g.n_head, g.head_size, g.ffn_dim, g.vocab, g.lora_w, g.lora_a, g.lora_v, g.lora_g,
      state_bytes, kernels_line(),
      g.n_attn == 0
          ? std::string()
          : fmt::format("RWKV-X     {} attention blocks (C/64 = {} heads of 64, FFN {}) after "
                        "every {} RWKV blocks\n"
                        "attention  {}\n"
                        "KV cache   {} bytes per token (fp32 K and V of every attention block)\n",
                        g.n_attn, g.n_embd / 64, g.attn_ffn_dim, g.n_layer / g.n_attn,
                        describe_attention(model.attention()),
                        2ull * g.n_attn * g.n_embd * sizeof(float)));
}

}  // namespace

void register_info(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto attention = std::make_shared<AttentionFlags>();
  auto load = std::make_shared<LoadOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Print a checkpoint's geometry, dtypes and size");
  cmd->add_option("-m,--model", *path, "Checkpoint; default: the embedded tiny model");
  add_load_options(cmd, *load);
  add_attention_flags(cmd, attention.get());
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([path, load, json, attention] { run_info(*path, *load, *json, *attention); });
}

}  // namespace wick::cli
