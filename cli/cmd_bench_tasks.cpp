// wick bench rerank --model M [--head H] [--docs 16] [--doc-tokens 256] [--query-tokens 16]
//                   [--reps 5] [--json]
// wick bench embed  --model M [--texts 16] [--tokens 128] [--batch 8] [--reps 5] [--json]
// Reranking: ms to fold one document prefix, ms per candidate on the indexed path (query tail +
// head from a copy of the folded state), ms per pair on the direct path, and the head alone.
// Without --head a random head is written for the model (wick synth's reranker head: 2 blocks
// reading the middle layer). Embedding: texts/s and ms/text with packed batches vs one text per
// pass. Texts are deterministic pseudo-random English words; their token counts are reported.
// Every test is run --reps times in one process and medians are printed.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/timer.h"
#include "commands.h"
#include "common.h"
#include "wick/embed.h"
#include "wick/errors.h"
#include "wick/rerank.h"
#include "wick/rng.h"
#include "wick/runtime.h"
#include "wick/synth.h"

namespace wick::cli {
namespace {

// A text of about `tokens` World tokens (common English words; mostly one token each).
std::string make_text(const Tokenizer& tok, int tokens, uint64_t seed) {
  static const char* kWords[] = {"the",   "honey", "river", "engine", "city",   "market", "light",
                                 "stone", "quiet", "north", "paper",  "garden", "music",  "winter",
                                 "green", "table", "early", "signal", "travel", "window"};
  SplitMix64 rng(seed);
  std::string text;
  while (static_cast<int>(tok.encode(text).size()) < tokens)
    for (int i = 0; i < 8; ++i)
      text += std::string(text.empty() ? "" : " ") + kWords[rng.next() % 20];
  return text;
}

struct BenchRerankOptions {
  std::string model, head, tokenizer;
  int docs = 16, doc_tokens = 256, query_tokens = 16, reps = 5;
  bool json = false;
};

void run_bench_rerank(const BenchRerankOptions& o) {
  Model model = open_model(o.model);
  std::shared_ptr<const Tokenizer> tok = tokenizer_for(model, o.tokenizer);
  std::string head = o.head;
  std::filesystem::path tmp;
  if (head.empty()) {
    tmp = std::filesystem::temp_directory_path() /
          ("wick-bench-head-" + std::to_string(::getpid()) + ".safetensors");
    write_synthetic_reranker_head(tmp.string(), model.geometry(), 2, model.geometry().n_layer / 2);
    head = tmp.string();
  }
  const Reranker r = [&] {
    try {
      Reranker loaded = Reranker::load(model, tok, head);
      if (!tmp.empty()) std::filesystem::remove(tmp);
      return loaded;
    } catch (...) {
      if (!tmp.empty()) std::filesystem::remove(tmp);
      throw;
    }
  }();
  std::vector<std::string> docs;
  for (int i = 0; i < o.docs; ++i) docs.push_back(make_text(*tok, o.doc_tokens, 1000 + i));
  const std::string query = make_text(*tok, o.query_tokens, 7);
  double prefix_tokens = 0;
  for (const std::string& d : docs) prefix_tokens += static_cast<double>(r.prefix_tokens(d).size());
  const double tail_tokens = static_cast<double>(r.tail_tokens(query).size());

  std::vector<State> folded;
  const double fold_ms = bench::median_ms_of(o.reps, [&] { folded = r.fold_documents(docs); });
  std::vector<const State*> ptrs;
  for (const State& s : folded) ptrs.push_back(&s);
  const double indexed_ms = bench::median_ms_of(o.reps, [&] { r.score_states(query, ptrs); });
  const double direct_ms = bench::median_ms_of(o.reps, [&] { r.score(query, docs); });
  const double head_ms = bench::median_ms_of(o.reps, [&] { r.head_logits(ptrs); });
  const double n = static_cast<double>(o.docs);
  nlohmann::json j = {{"test", "rerank"},
                      {"model", o.model},
                      {"head", o.head.empty() ? "synthetic" : o.head},
                      {"docs", o.docs},
                      {"prefix_tokens_mean", prefix_tokens / n},
                      {"tail_tokens", tail_tokens},
                      {"fold_ms_per_doc", fold_ms / n},
                      {"fold_tokens_per_s", prefix_tokens / (fold_ms / 1e3)},
                      {"indexed_ms_per_candidate", indexed_ms / n},
                      {"direct_ms_per_pair", direct_ms / n},
                      {"head_ms_per_candidate", head_ms / n},
                      {"indexed_speedup", direct_ms / indexed_ms},
                      {"reps", o.reps},
                      {"threads", cli_runtime()->threads()}};
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("model      {} ({} layers, C {})\nhead       {} (reads layers", o.model,
             model.geometry().n_layer, model.geometry().n_embd, j["head"].get<std::string>());
  for (int l : r.source_layers()) fmt::print(" {}", l);
  fmt::print(")\ndocuments  {} x {:.0f} prefix tokens; query tail {:.0f} tokens; medians of {}\n",
             o.docs, prefix_tokens / n, tail_tokens, o.reps);
  fmt::print("fold       {:8.2f} ms per document prefix ({:.0f} tokens/s)\n", fold_ms / n,
             prefix_tokens / (fold_ms / 1e3));
  fmt::print("indexed    {:8.2f} ms per candidate (tail + head from the folded state)\n",
             indexed_ms / n);
  fmt::print("direct     {:8.2f} ms per pair ({:.1f}x the indexed path)\n", direct_ms / n,
             direct_ms / indexed_ms);
  fmt::print("head       {:8.3f} ms per candidate\n", head_ms / n);
}

struct BenchEmbedOptions {
  std::string model, tokenizer;
  int texts = 16, tokens = 128, batch = 8, reps = 5;
  bool json = false;
};

void run_bench_embed(const BenchEmbedOptions& o) {
  Model model = open_model(o.model);
  std::shared_ptr<const Tokenizer> tok = tokenizer_for(model, o.tokenizer);
  EmbedContract contract;
  contract.max_tokens = 0;
  const Embedder e = Embedder::plain(model, tok, contract);
  std::vector<std::string> texts;
  double tokens = 0;
  for (int i = 0; i < o.texts; ++i) {
    texts.push_back(make_text(*tok, o.tokens, 2000 + i));
    tokens += static_cast<double>(e.tokens(texts.back()).size());
  }
  const double batched_ms = bench::median_ms_of(o.reps, [&] { e.embed(texts, o.batch); });
  const double single_ms = bench::median_ms_of(o.reps, [&] { e.embed(texts, 1); });
  const double n = static_cast<double>(o.texts);
  nlohmann::json j = {{"test", "embed"},
                      {"model", o.model},
                      {"texts", o.texts},
                      {"tokens_per_text_mean", tokens / n},
                      {"batch", o.batch},
                      {"texts_per_s", n / (batched_ms / 1e3)},
                      {"ms_per_text", batched_ms / n},
                      {"tokens_per_s", tokens / (batched_ms / 1e3)},
                      {"texts_per_s_one_by_one", n / (single_ms / 1e3)},
                      {"reps", o.reps},
                      {"threads", cli_runtime()->threads()}};
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("model      {}\ntexts      {} x {:.0f} tokens; medians of {}\n", o.model, o.texts,
             tokens / n, o.reps);
  fmt::print("batch {:<4} {:8.1f} texts/s ({:.2f} ms/text, {:.0f} tokens/s)\n", o.batch,
             n / (batched_ms / 1e3), batched_ms / n, tokens / (batched_ms / 1e3));
  fmt::print("one by one {:8.1f} texts/s ({:.2f} ms/text)\n", n / (single_ms / 1e3), single_ms / n);
}

}  // namespace

void register_bench_tasks(CLI::App* bench) {
  auto r = std::make_shared<BenchRerankOptions>();
  CLI::App* rc =
      bench->add_subcommand("rerank", "Reranker: fold, indexed and direct cost per document");
  rc->add_option("-m,--model", r->model, "Base checkpoint (e.g. wick synth --geometry 0.1b)")
      ->required();
  rc->add_option("--head", r->head, "Reranker head; default: a random head for the model");
  rc->add_option("--docs", r->docs, "Documents (default 16)")->check(CLI::Range(1, 100000));
  rc->add_option("--doc-tokens", r->doc_tokens, "Tokens per document (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  rc->add_option("--query-tokens", r->query_tokens, "Tokens per query (default 16)")
      ->check(CLI::Range(1, 1 << 20));
  rc->add_option("--reps", r->reps, "Repetitions (medians; default 5)")->check(CLI::Range(1, 1000));
  rc->add_option("--tokenizer", r->tokenizer, "Vocabulary file; default: World for 65536 rows");
  rc->add_flag("--json", r->json, "One JSON object");
  rc->callback([r] { run_bench_rerank(*r); });

  auto e = std::make_shared<BenchEmbedOptions>();
  CLI::App* ec = bench->add_subcommand("embed", "Embedder: texts/s with packed batches");
  ec->add_option("-m,--model", e->model, "Base checkpoint (e.g. wick synth --geometry 0.1b)")
      ->required();
  ec->add_option("--texts", e->texts, "Texts (default 16)")->check(CLI::Range(1, 100000));
  ec->add_option("--tokens", e->tokens, "Tokens per text (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  ec->add_option("--batch", e->batch, "Texts per packed pass (default 8)")
      ->check(CLI::Range(1, 4096));
  ec->add_option("--reps", e->reps, "Repetitions (medians; default 5)")->check(CLI::Range(1, 1000));
  ec->add_option("--tokenizer", e->tokenizer, "Vocabulary file; default: World for 65536 rows");
  ec->add_flag("--json", e->json, "One JSON object");
  ec->callback([e] { run_bench_embed(*e); });
}

}  // namespace wick::cli
