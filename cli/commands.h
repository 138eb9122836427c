// Registration of the subcommands (one cmd_*.cpp each).
#pragma once

#include <CLI/CLI.hpp>

namespace wick::cli {

void register_generate(CLI::App& app);
void register_chat(CLI::App& app);
void register_info(CLI::App& app);
void register_logits(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_detokenize(CLI::App& app);
void register_bench(CLI::App& app);
void register_bench_generate(CLI::App* bench);  // `wick bench generate`, under register_bench
void register_bench_serve(CLI::App* bench);     // `wick bench serve`, under register_bench
void register_bench_model(CLI::App* bench);
void register_bench_tasks(CLI::App* bench);  // `wick bench rerank` / `wick bench embed`     //
                                             // `wick bench --model ...`, under register_bench
void register_synth(CLI::App& app);
void register_quantize(CLI::App& app);
void register_embed(CLI::App& app);
void register_rerank(CLI::App& app);
void register_ppl(CLI::App& app);
void register_kl(CLI::App& app);
void register_act_stats(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_lora_merge(CLI::App& app);  // `wick lora-merge` (wick/lora.h)
void register_serve(CLI::App& app);       // `wick serve`: the HTTP server (server/)

}  // namespace wick::cli
