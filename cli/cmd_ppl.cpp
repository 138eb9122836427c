// wick ppl --model M --text FILE [--ctx 512] [--max-windows N] [--tokenizer T] [--quantize Q]
//          [--init-state F] [--json]
// Perplexity of a model on a UTF-8 text (include/wick/perplexity.h; docs/rwkvq-format.md §4): the
// text is tokenised once and cut into non-overlapping windows of --ctx tokens from the start; the
// partial tail is dropped; each window is scored from a zero state (or the state-tuned initial
// state of --init-state). Prints one line, or with
// --json one object {"ppl", "mean_nll", "tokens_scored", "windows", "ctx", "text_tokens",
// "unused_tokens", "model", "quantize" ("none" | "int8"), "text", "tokenizer", "pass", "init_state"
// (path or null)}. A progress bar goes to stderr on a terminal.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "common.h"
#include "evaluation_text.h"
#include "progress.h"
#include "wick/perplexity.h"
#include "wick/tuned_state.h"

namespace wick::cli {
namespace {

struct PplOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model, text, tokenizer;
  std::string init_state;  // windows start from this state-tuned initial state
  int ctx = 512;
  int64_t max_windows = 0;
  bool recurrent = false;
  bool json = false;
};

void run_ppl(const PplOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  auto tokenizer = tokenizer_for(model, o.tokenizer);
  const EvaluationText text = load_evaluation_text(o.text, *tokenizer, {o.ctx, o.max_windows});
  const ScoringPass pass = o.recurrent ? ScoringPass::kRecurrent : ScoringPass::kParallel;
  std::optional<State> start;
  if (!o.init_state.empty()) start = load_tuned_state(o.init_state, model);
  PerplexityResult r;
  {
    ProgressBar bar("ppl", static_cast<int64_t>(text.windows.size()), "window");
    r = perplexity(
        model, text.windows, pass, [&bar](int64_t done, int64_t) { bar.update(done); },
        start ? &*start : nullptr);
    bar.finish();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    const nlohmann::json j = {
        {"ppl", r.ppl},
        {"mean_nll", r.mean_nll},
        {"tokens_scored", r.tokens_scored},
        {"windows", r.windows},
        {"ctx", o.ctx},
        {"text_tokens", text.text_tokens},
        {"unused_tokens", text.unused_tokens},
        {"model", model.info().source},
        {"quantize", std::string(weight_quantization_name(model.info().quantization))},
        {"text", o.text},
        {"tokenizer", std::string(tokenizer->name())},
        {"pass", o.recurrent ? "recurrent" : "parallel"},
        {"init_state",
         o.init_state.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.init_state)},
    };
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << fmt::format(
      "ppl {:.4f}  (mean NLL {:.6f} nats/token over {} tokens in {} "
      "windows of {})\n",
      r.ppl, r.mean_nll, r.tokens_scored, r.windows, o.ctx);
  std::cerr << fmt::format("[wick] {} of {} text tokens unused (partial tail{}), {:.2f} s\n",
                           text.unused_tokens, text.text_tokens,
                           o.max_windows > 0 ? " and windows past --max-windows" : "", seconds);
}

}  // namespace

void register_ppl(CLI::App& app) {
  auto o = std::make_shared<PplOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ppl", "Perplexity on a UTF-8 text: windows of --ctx tokens, each from a zero state");
  cmd->add_option("-m,--model", o->model,
                  "Checkpoint (.safetensors, .pth, .rwkvq or HF folder); default: the embedded "
                  "tiny model");
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  cmd->add_option("--text", o->text, "UTF-8 text file, tokenised whole")->required();
  cmd->add_option("--ctx", o->ctx,
                  "Tokens per window (default 512; each scores ctx - 1 predictions; the partial "
                  "tail of the text is dropped)");
  cmd->add_option("--max-windows", o->max_windows, "Score only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: "
                  "byte-level for 256-token models, the embedded World vocabulary for 65536");
  cmd->add_flag("--recurrent", o->recurrent,
                "Score with the recurrent step instead of the parallel pass (same numbers)");
  cmd->add_option("--init-state", o->init_state,
                  "Score each window from this state-tuned initial state (RWKV-PEFT time_state "
                  "file) instead of a zero state");
  cmd->add_flag("--json", o->json,
                "Print one JSON object {\"ppl\", \"mean_nll\", \"tokens_scored\", ...}");
  cmd->callback([o] { run_ppl(*o); });
}

}  // namespace wick::cli
