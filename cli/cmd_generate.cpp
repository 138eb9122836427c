// wick generate --model PATH --prompt TEXT --max-tokens N [--json]
// Prints only the generated text on stdout (streamed as it is produced); --json prints one JSON
// object instead: {"tokens", "text", "stop_reason", "prompt_tokens", "timings"}.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "wick/generate.h"

namespace wick::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::string tokenizer;
  int max_tokens = 64;
  bool json = false;
};

void run_generate(const GenerateOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  Model model = load_model_or_default(o.model);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto tokenizer = tokenizer_for(model, o.tokenizer);
  State state = model.new_state();
  GenerationConfig cfg;
  cfg.max_tokens = o.max_tokens;
  TokenCallback stream;
  if (!o.json) {
    stream = [](int32_t, std::string_view bytes) {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  GenerationResult r = generate(model, *tokenizer, o.prompt, cfg, state, stream);
  if (!o.json) {
    std::fputc('\n', stdout);
    std::fprintf(stderr, "[wick] %d prompt tokens in %.2f ms, %zu tokens in %.2f ms (%.1f tok/s)\n",
                 r.prompt_tokens, r.timings.prefill_ms, r.tokens.size(), r.timings.decode_ms,
                 r.timings.decode_ms > 0 ? 1000.0 * r.timings.decode_steps / r.timings.decode_ms : 0.0);
    return;
  }
  nlohmann::json j;
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["stop_reason"] = r.stop_reason;
  j["prompt_tokens"] = r.prompt_tokens;
  j["timings"] = {
      {"load_ms", load_ms},
      {"prefill_ms", r.timings.prefill_ms},
      {"decode_ms", r.timings.decode_ms},
      {"prefill_tokens_per_s", r.timings.prefill_ms > 0 ? 1000.0 * r.prompt_tokens / r.timings.prefill_ms : 0.0},
      {"decode_tokens_per_s",
       r.timings.decode_ms > 0 ? 1000.0 * r.timings.decode_steps / r.timings.decode_ms : 0.0},
  };
  // Byte-level models can stop inside a UTF-8 sequence: invalid bytes become U+FFFD in "text"
  // ("tokens" stays exact).
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt (greedy decoding)");
  cmd->add_option("-m,--model", o->model,
                  "Checkpoint (.safetensors, .pth or HF folder); default: the embedded tiny model");
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: byte-level "
                  "for 256-token models, the embedded World vocabulary for 65536");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Tokens to generate (default 64)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--json", o->json, "Print a JSON object instead of the text");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace wick::cli
