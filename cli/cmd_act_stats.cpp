// wick act-stats --model M --text FILE --out FILE [--ctx 512] [--max-windows N] [--tokenizer T]
// Activation statistics for the activation-weighted quantiser modes (include/wick/act_stats.h;
// docs/rwkvq-format.md §3.6): E[x^2] per input channel of every projection, FFN matrix and the
// head, over the windows of a UTF-8 text cut as `wick ppl` cuts them, each window from a zero
// state. Writes a safetensors file of F32 [IN] vectors and prints one summary line; a progress bar
// goes to stderr on a terminal.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "commands.h"
#include "common.h"
#include "evaluation_text.h"
#include "progress.h"
#include "wick/act_stats.h"

namespace wick::cli {
namespace {

struct ActStatsOptions {
  std::string model, text, out, tokenizer;
  int ctx = 512;
  int64_t max_windows = 0;
};

void run_act_stats(const ActStatsOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Model model = open_model(o.model);
  auto tokenizer = tokenizer_for(model, o.tokenizer);
  const EvaluationText text = load_evaluation_text(o.text, *tokenizer, {o.ctx, o.max_windows});
  ActStatsResult r;
  {
    ProgressBar bar("act-stats", static_cast<int64_t>(text.windows.size()), "window");
    r = collect_act_stats(model, text.windows, [&bar](int64_t done, int64_t) { bar.update(done); });
    bar.finish();
  }
  save_act_stats(o.out, r);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format(
      "wrote {}: E[x^2] per input channel of {} weight matrices over {} "
      "tokens ({} windows of {})\n",
      o.out, r.stats.size(), r.tokens, r.windows, o.ctx);
  std::cerr << fmt::format(
      "[wick] {} of {} text tokens fed (not fed: the last token of each "
      "window, the partial tail{}), {:.2f} s\n",
      r.tokens, text.text_tokens, o.max_windows > 0 ? " and windows past --max-windows" : "",
      seconds);
}

}  // namespace

void register_act_stats(CLI::App& app) {
  auto o = std::make_shared<ActStatsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "act-stats",
      "Activation statistics for the activation-weighted quantiser: E[x^2] per input channel of "
      "every projection, FFN matrix and the head over windows of a text (each from a zero "
      "state), written as safetensors (F32 [IN] per weight key). The stats come from the model "
      "given; rwkv-quant collects them on the dense model, so pass the dense checkpoint");
  cmd->add_option("-m,--model", o->model, "Checkpoint (.safetensors, .pth, HF folder, or .rwkvq)")
      ->required();
  cmd->add_option("--text", o->text, "UTF-8 calibration text file, tokenised whole")->required();
  cmd->add_option("-o,--out", o->out, "Output .safetensors file (written atomically)")->required();
  cmd->add_option("--ctx", o->ctx,
                  "Tokens per window (default 512; as in `wick ppl`, the first ctx - 1 are fed; "
                  "the partial tail of the text is dropped)");
  cmd->add_option("--max-windows", o->max_windows, "Use only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: "
                  "byte-level for 256-token models, the embedded World vocabulary for 65536");
  cmd->callback([o] { run_act_stats(*o); });
}

}  // namespace wick::cli
