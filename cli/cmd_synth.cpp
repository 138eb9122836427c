// wick synth --geometry 0.1b|0.4b|1.5b|2.9b|L:C[:vocab] [--dtype bf16|fp16|fp32] [--seed S]
//            --out FILE.safetensors [--json]
// Writes a deterministic synthetic checkpoint (random weights, real geometry; include/wick/synth.h)
// and prints its path, geometry, parameter count, size and the time taken (--json: one object).
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "wick/synth.h"

namespace wick::cli {
namespace {

struct SynthOptions {
  std::string geometry;
  std::string dtype = "bf16";
  uint64_t seed = 0;
  int attention_blocks = -1;  // -1: as the geometry says (0 unless an RWKV-X size)
  std::string out;
  bool json = false;
};

void run_synth(const SynthOptions& o) {
  SynthGeometry sg = parse_synth_geometry(o.geometry);
  if (o.attention_blocks >= 0 && o.attention_blocks != sg.geometry.n_attn) {
    const Geometry g0 = sg.geometry;
    sg = make_synth_geometry(g0.n_layer, g0.n_embd, g0.vocab, o.attention_blocks);
  }
  const DType dtype = parse_synth_dtype(o.dtype);
  const auto t0 = std::chrono::steady_clock::now();
  const SynthSummary s = write_synthetic_checkpoint(o.out, sg, dtype, o.seed);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const Geometry& g = sg.geometry;
  if (o.json) {
    nlohmann::json j;
    j["path"] = o.out;
    j["geometry"] = sg.label;
    j["dtype"] = std::string(synth_dtype_name(dtype));
    j["seed"] = o.seed;
    j["dims"] = {{"n_layer", g.n_layer},     {"n_embd", g.n_embd},   {"n_head", g.n_head},
                 {"head_size", g.head_size}, {"ffn_dim", g.ffn_dim}, {"vocab", g.vocab},
                 {"lora_w", g.lora_w},       {"lora_a", g.lora_a},   {"lora_v", g.lora_v},
                 {"lora_g", g.lora_g},       {"n_attn", g.n_attn}};
    j["tensors"] = s.tensors;
    j["parameters"] = s.parameters;
    j["file_bytes"] = s.file_bytes;
    j["time_ms"] = ms;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format(
      "wrote      {}\n"
      "geometry   {} (L={} C={} H={} N={} F={} V={}; LoRA ranks {}/{}/{}/{}{}), {}, seed {}\n"
      "parameters {} ({:.2f} M) in {} tensors\n"
      "file size  {} bytes ({:.2f} MiB)\n"
      "time       {:.2f} s\n"
      "note       random weights (not a trained model): the text it generates is meaningless\n",
      o.out, sg.label, g.n_layer, g.n_embd, g.n_head, g.head_size, g.ffn_dim, g.vocab, g.lora_w,
      g.lora_a, g.lora_v, g.lora_g,
      g.n_attn ? fmt::format("; RWKV-X: {} attention blocks", g.n_attn) : std::string(),
      synth_dtype_name(dtype), o.seed, s.parameters, s.parameters / 1e6, s.tensors, s.file_bytes,
      s.file_bytes / 1048576.0, ms / 1000.0);
}

}  // namespace

void register_synth(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Write a deterministic synthetic checkpoint: random weights with the official names and a "
      "real model's geometry (for benchmarks and trials; the text it generates is meaningless)");
  cmd->add_option("-g,--geometry", o->geometry,
                  "0.1b (L 12, C 768), 0.4b (L 24, C 1024), 1.5b (L 24, C 2048), 2.9b (L 32, "
                  "C 2560), rwkvx-0.2b (12 RWKV + 4 attention blocks, C 768), rwkvx-3.6b (32 + 8, "
                  "C 2560), or L:C[:vocab] with C a multiple of 64 (vocab default 65536); head "
                  "size 64, F = 4C, official LoRA ranks")
      ->required();
  cmd->add_option("--attention-blocks", o->attention_blocks,
                  "RWKV-X: this many attention blocks (L must be a multiple; 0 = plain RWKV-7)")
      ->check(CLI::Range(0, kSynthMaxLayers));
  cmd->add_option("--dtype", o->dtype, "bf16, fp16 or fp32 (default bf16)");
  cmd->add_option("--seed", o->seed,
                  "Random seed (default 0); the same seed gives a byte-identical file");
  cmd->add_option("-o,--out", o->out, "Output .safetensors file (written atomically)")->required();
  cmd->add_flag("--json", o->json, "Print a JSON object instead of text");
  cmd->callback([o] { run_synth(*o); });
}

}  // namespace wick::cli
