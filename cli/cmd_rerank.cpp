// wick rerank --model M --head H --query Q --docs docs.jsonl [--index DIR] [--json]
// Scores every document of a JSON-lines file against the query with a reranker head
// (docs/tasks.md §5) and prints them sorted by score (ties by input order).
//   --index DIR  folds each document's prefix once and keeps its state in DIR (reused on the next
//                call; without --docs the documents are those stored in DIR); scoring then runs
//                only the query tail per document.
//   --json       {"results": [{"index": i, "logit": x, "score": s}, ...]}: index = 0-based line
//                of the document, score = sigmoid(logit) for EmbeddingRWKV heads, else the logit.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "common.h"
#include "progress.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/rerank.h"

namespace wick::cli {
namespace {

struct RerankOptions {
  LoadOptions load;  // --quantize
  std::string model, tokenizer, head, query, docs, index;
  bool json = false;
  bool non_strict = false;
  int top_k = 0;
  int batch = 8;
};

std::string preview(const std::string& text, size_t max_bytes) {
  std::string one_line;
  for (char c : text) one_line += (c == '\n' || c == '\t' || c == '\r') ? ' ' : c;
  if (one_line.size() <= max_bytes) return one_line;
  return one_line.substr(0, utf8_boundary(one_line, max_bytes)) + "...";  // whole characters
}

void run_rerank(const RerankOptions& o) {
  if (o.docs.empty() && o.index.empty())
    throw InputError("give the documents with --docs FILE (or a stored index with --index DIR)");
  Model model = open_model(o.model, o.load);
  std::shared_ptr<const Tokenizer> tok = tokenizer_for(model, o.tokenizer);
  const Reranker reranker = Reranker::load(model, tok, o.head, !o.non_strict);
  std::vector<std::string> docs;
  std::vector<float> logits;
  if (!o.index.empty()) {
    std::optional<DocumentIndex> index;
    if (o.docs.empty()) {
      index = DocumentIndex::open(reranker, o.index);
    } else {
      std::vector<std::string> texts = read_jsonl_texts(o.docs);
      const int64_t n_docs = static_cast<int64_t>(texts.size());
      ProgressBar fold("fold", n_docs, "document");
      // Documents found in the index are not folded again: they count as done from the start.
      index = DocumentIndex::build(
          reranker, std::move(texts), o.index, nullptr,
          [&](int64_t done, int64_t pending) { fold.update(n_docs - pending + done); });
      fold.finish();
      if (!o.json) {
        std::cerr << "wick: index " << o.index << ": " << index->folded() << " of " << index->size()
                  << " documents folded, the rest reused\n";
      }
    }
    ProgressBar bar("score", static_cast<int64_t>(index->size()), "document");
    logits = index->score(reranker, o.query, [&](int64_t done, int64_t) { bar.update(done); });
    bar.finish();
    docs = index->documents();
  } else {
    docs = read_jsonl_texts(o.docs);
    ProgressBar bar("score", static_cast<int64_t>(docs.size()), "document");
    logits =
        reranker.score(o.query, docs, o.batch, [&](int64_t done, int64_t) { bar.update(done); });
    bar.finish();
  }
  std::vector<RerankResult> ranked = reranker.rank(logits);
  if (o.top_k > 0 && ranked.size() > static_cast<size_t>(o.top_k)) ranked.resize(o.top_k);
  std::string out;
  if (o.json) {
    out = "{\"results\": [";
    for (size_t i = 0; i < ranked.size(); ++i) {
      out += (i ? ",\n" : "\n") + std::string("{\"index\": ") + std::to_string(ranked[i].index) +
             ", \"logit\": " + float_json(ranked[i].logit) +
             ", \"score\": " + float_json(ranked[i].score) + "}";
    }
    out += ranked.empty() ? "]}\n" : "\n]}\n";
  } else {
    char line[160];
    std::snprintf(line, sizeof line, "%-5s %-6s %-12s %s\n", "rank", "index",
                  reranker.has_sigmoid() ? "score" : "logit", "document");
    out += line;
    for (size_t i = 0; i < ranked.size(); ++i) {
      std::snprintf(line, sizeof line, "%-5zu %-6lld %-12.6f ", i + 1,
                    static_cast<long long>(ranked[i].index), ranked[i].score);
      out += line + preview(docs[ranked[i].index], 70) + "\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void register_rerank(CLI::App& app) {
  auto o = std::make_shared<RerankOptions>();
  CLI::App* cmd =
      app.add_subcommand("rerank", "Score documents against a query with a reranker head");
  cmd->add_option("-m,--model", o->model,
                  "Base checkpoint (for EmbeddingRWKV: its embedding model)")
      ->required();
  add_load_options(cmd, o->load);
  cmd->add_option("--head", o->head,
                  "Reranker head: rwkv-metal/SwiftRWKV .safetensors or EmbeddingRWKV reranker .pth")
      ->required();
  cmd->add_option("-q,--query", o->query, "The query")->required();
  cmd->add_option("--docs", o->docs, "Documents: JSON lines, one {\"text\": ...} per line");
  cmd->add_option("--index", o->index,
                  "Folder of folded document states: with --docs, the index becomes these "
                  "documents (states already in the folder are reused); without, its documents "
                  "are scored");
  cmd->add_flag("--json", o->json, "Print {\"results\": [{\"index\", \"logit\", \"score\"}, ...]}");
  cmd->add_option("--top-k", o->top_k, "Print only the best K documents (0 = all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tokenizer", o->tokenizer, "Vocabulary file; default: World for 65536 rows");
  cmd->add_option("--batch", o->batch, "Pairs per packed pass on the direct path (default 8)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--non-strict", o->non_strict,
                "Accept a head without format marker / with metadata of another base");
  cmd->callback([o] { run_rerank(*o); });
}

}  // namespace wick::cli
