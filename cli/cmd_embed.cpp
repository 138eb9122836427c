// wick embed --model M [--head H] [--task retr|sts|cls] --file texts.jsonl [--out F] [--json]
// Embeds every `text` of a JSON-lines file (docs/tasks.md §6). An EmbeddingRWKV checkpoint
// carries its task heads (--task); a SwiftRWKV / rwkv-metal head comes with --head; without
// either the vectors are L2(pooled). Vectors are L2-normalised, one per input line, in order.
//   --json  prints {"embeddings": [[...], ...]} (also the default when --out is not given)
//   --out   writes a safetensors file: `embeddings` F32 [N, C] plus string metadata
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "commands.h"
#include "common.h"
#include "progress.h"
#include "wick/embed.h"
#include "wick/errors.h"

namespace wick::cli {
namespace {

struct EmbedOptions {
  LoadOptions load;  // --quantize
  std::string model, tokenizer, head, task = "retr", file, out, pooling;
  bool json = false;
  bool non_strict = false;
  bool task_given = false;
  int max_tokens = -1;  // -1: the format's default
  int batch = 8;
};

EmbedTask parse_task(const std::string& t) {
  if (t == "retr") return EmbedTask::kRetrieval;
  if (t == "sts") return EmbedTask::kSimilarity;
  if (t == "cls") return EmbedTask::kClassification;
  throw InputError("--task: expected retr, sts or cls, found '" + t + "'");
}

Embedder make_embedder(const EmbedOptions& o, const Model& model,
                       std::shared_ptr<const Tokenizer> tok) {
  if (model.info().embedding_rwkv) {
    if (!o.head.empty()) {
      throw InputError("--head: " + o.model +
                       " is an EmbeddingRWKV checkpoint with its own task "
                       "heads; choose one with --task retr|sts|cls instead");
    }
    if (!o.pooling.empty()) throw InputError("--pooling: EmbeddingRWKV always pools at EOS");
    return Embedder::embedding_rwkv(model, std::move(tok), o.model, parse_task(o.task),
                                    o.max_tokens < 0 ? 0 : o.max_tokens);
  }
  if (o.task_given) {
    throw InputError("--task selects a task head of an EmbeddingRWKV checkpoint; " + o.model +
                     " is not one (give its head with --head, or no head)");
  }
  Embedder::Overrides overrides;
  if (!o.pooling.empty()) {
    if (o.pooling != "last" && o.pooling != "mean")
      throw InputError("--pooling: expected last or mean, found '" + o.pooling + "'");
    overrides.pooling = o.pooling == "mean" ? Pooling::kMean : Pooling::kLast;
  }
  if (o.max_tokens >= 0) overrides.max_tokens = o.max_tokens;
  if (o.head.empty()) {
    EmbedContract contract;
    if (overrides.pooling) contract.pooling = *overrides.pooling;
    if (overrides.max_tokens) contract.max_tokens = *overrides.max_tokens;
    return Embedder::plain(model, std::move(tok), contract);
  }
  return Embedder::with_head(model, std::move(tok), o.head, !o.non_strict, overrides);
}

void run_embed(const EmbedOptions& o) {
  if (o.model.empty()) throw InputError("--model is required");
  const std::vector<std::string> texts = read_jsonl_texts(o.file);
  Model model = open_model(o.model, o.load);
  std::shared_ptr<const Tokenizer> tok = tokenizer_for(model, o.tokenizer);
  const Embedder embedder = make_embedder(o, model, tok);
  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("embed", static_cast<int64_t>(texts.size()), "text");
  const std::vector<float> vectors =
      embedder.embed(texts, o.batch, [&](int64_t done, int64_t) { bar.update(done); });
  bar.finish();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t C = embedder.dim();
  if (!o.out.empty()) {
    save_embeddings(o.out, vectors, static_cast<int64_t>(texts.size()), C,
                    {{"model", o.model},
                     {"model_fingerprint", model.info().fingerprint},
                     {"head", model.info().embedding_rwkv ? o.model + " [" + o.task + "]" : o.head},
                     {"n_texts", std::to_string(texts.size())},
                     {"dim", std::to_string(C)}});
    std::cerr << "wick: embedded " << texts.size() << " texts (dim " << C << ") in "
              << static_cast<int64_t>(ms) << " ms -> " << o.out << "\n";
  }
  if (o.json || o.out.empty()) {
    std::string out = "{\"embeddings\": [";
    for (size_t i = 0; i < texts.size(); ++i) {
      out += i ? ",\n[" : "\n[";
      for (int64_t c = 0; c < C; ++c) {
        if (c) out += ", ";
        out += float_json(vectors[i * C + c]);
      }
      out += "]";
    }
    out += texts.empty() ? "]}\n" : "\n]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
}

}  // namespace

void register_embed(CLI::App& app) {
  auto o = std::make_shared<EmbedOptions>();
  CLI::App* cmd = app.add_subcommand("embed", "Embed texts (JSON lines with a \"text\" field)");
  cmd->add_option("-m,--model", o->model,
                  "Base checkpoint (an EmbeddingRWKV .pth carries its task heads)")
      ->required();
  add_load_options(cmd, o->load);
  cmd->add_option("--head", o->head, "Embedding head file (SwiftRWKV / rwkv-metal safetensors)");
  CLI::Option* task = cmd->add_option("--task", o->task,
                                      "EmbeddingRWKV task head: retr, sts or cls (default retr)");
  cmd->add_option("-f,--file", o->file, "Texts: JSON lines, one {\"text\": ...} per line")
      ->required();
  cmd->add_option("-o,--out", o->out, "Write the vectors as safetensors (embeddings F32 [N, C])");
  cmd->add_flag("--json", o->json, "Print {\"embeddings\": [[...], ...]} (default without --out)");
  cmd->add_option("--tokenizer", o->tokenizer, "Vocabulary file; default: World for 65536 rows");
  cmd->add_option("--pooling", o->pooling,
                  "last or mean: the contract of a head without metadata (with --non-strict) or "
                  "of no-head vectors (default last); must agree with a head that records one");
  cmd->add_option("--max-tokens", o->max_tokens,
                  "Token limit per text (0 = none). Head/no-head: truncate (default 512); "
                  "EmbeddingRWKV: refuse longer texts (default none)");
  cmd->add_option("--batch", o->batch, "Texts per packed pass (default 8)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--non-strict", o->non_strict,
                "Accept a head without format marker; rwkv-metal heads (no metadata) also need "
                "--pooling");
  cmd->callback([o, task] {
    o->task_given = task->count() > 0;
    run_embed(*o);
  });
}

}  // namespace wick::cli
