// wick kl --reference M0 --model M1 --text FILE [--ctx 512] [--max-windows N] [--quantize Q]
//         [--json]    (--quantize applies to --model, not to --reference)
// KL(P_reference || Q_model) per position on the windows of a UTF-8 text, the protocol of
// docs/rwkvq-format.md §4 (include/wick/perplexity.h): mean over windows with a 95 % bootstrap
// interval, mean per position bucket, top-1 agreement. With --json one object {"mean_kl",
// "ci_low", "ci_high", "ci_level", "resamples", "top1_agreement", "buckets": [{"begin", "end",
// "mean_kl", "positions"}], "window_kl", "positions", "windows", "ctx", "text_tokens",
// "unused_tokens", "reference", "model", "quantize" (of --model), "text", "tokenizer"}. Progress
// bar on a terminal.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "evaluation_text.h"
#include "progress.h"
#include "wick/perplexity.h"

namespace wick::cli {
namespace {

struct KlCliOptions {
  LoadOptions load;  // --quantize
  std::string reference, model, text, tokenizer;
  int ctx = 512;
  int64_t max_windows = 0;
  KlOptions kl;
  bool json = false;
};

nlohmann::json to_json(const KlCliOptions& o, const KlResult& r, const EvaluationText& text,
                       const Model& reference, const Model& model, const Tokenizer& tokenizer) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const KlBucket& b : r.buckets) {
    buckets.push_back(
        {{"begin", b.begin}, {"end", b.end}, {"mean_kl", b.mean_kl}, {"positions", b.positions}});
  }
  return {{"mean_kl", r.mean_kl},
          {"ci_low", r.ci_low},
          {"ci_high", r.ci_high},
          {"ci_level", o.kl.ci_level},
          {"resamples", o.kl.bootstrap_resamples},
          {"top1_agreement", r.top1_agreement},
          {"buckets", buckets},
          {"window_kl", r.window_kl},
          {"positions", r.positions},
          {"windows", r.windows},
          {"ctx", o.ctx},
          {"text_tokens", text.text_tokens},
          {"unused_tokens", text.unused_tokens},
          {"reference", reference.info().source},
          {"model", model.info().source},
          {"quantize", std::string(weight_quantization_name(model.info().quantization))},
          {"text", o.text},
          {"tokenizer", std::string(tokenizer.name())}};
}

void run_kl(const KlCliOptions& o) {
  Model reference = open_model(o.reference);
  Model model = open_model(o.model, o.load);
  auto tokenizer = tokenizer_for(reference, o.tokenizer);
  const EvaluationText text = load_evaluation_text(o.text, *tokenizer, {o.ctx, o.max_windows});
  KlResult r;
  {
    ProgressBar bar("kl", static_cast<int64_t>(text.windows.size()), "window");
    r = kl_divergence(reference, model, text.windows, o.kl,
                      [&bar](int64_t done, int64_t) { bar.update(done); });
    bar.finish();
  }
  if (o.json) {
    std::cout << to_json(o, r, text, reference, model, *tokenizer)
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return;
  }
  std::string out = fmt::format(
      "KL(reference || model) {:.6g} nats/token, {:g}% CI [{:.6g}, {:.6g}] over {} windows of {} "
      "({} positions)\ntop-1 agreement {:.4f}\n",
      r.mean_kl, 100 * o.kl.ci_level, r.ci_low, r.ci_high, r.windows, o.ctx, r.positions,
      r.top1_agreement);
  for (const KlBucket& b : r.buckets) {
    out += fmt::format("positions [{}, {}): {:.6g} nats/token ({} positions)\n", b.begin, b.end,
                       b.mean_kl, b.positions);
  }
  std::cout << out;
}

}  // namespace

void register_kl(CLI::App& app) {
  auto o = std::make_shared<KlCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kl",
      "KL divergence of a model to a reference on a UTF-8 text (per position, bootstrap "
      "CI, position buckets, top-1 agreement)");
  cmd->add_option("--reference", o->reference, "Reference checkpoint (P), e.g. the dense model")
      ->required();
  cmd->add_option("-m,--model", o->model, "Checkpoint compared with it (Q), e.g. a .rwkvq")
      ->required();
  add_load_options(cmd, o->load);
  cmd->add_option("--text", o->text, "UTF-8 text file, tokenised whole")->required();
  cmd->add_option("--ctx", o->ctx, "Tokens per window (default 512; the partial tail is dropped)");
  cmd->add_option("--max-windows", o->max_windows, "Use only the first N windows (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: by the "
                  "models' vocabulary size");
  cmd->add_option("--resamples", o->kl.bootstrap_resamples,
                  "Bootstrap resamples of the windows for the 95% CI (default 20000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", o->kl.seed, "Seed of the bootstrap resampling (default 0)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->callback([o] { run_kl(*o); });
}

}  // namespace wick::cli
