// The C++ tasks (wick/embed.h, wick/rerank.h, wick/perplexity.h) as functions: wick.embed,
// wick.rerank, wick.perplexity. Each mirrors its CLI command (`wick embed`, `wick rerank`,
// `wick ppl`) and releases the GIL while it runs.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "binding.h"
#include "wick/embed.h"
#include "wick/errors.h"
#include "wick/perplexity.h"
#include "wick/rerank.h"

namespace wick::py_binding {
namespace {

std::shared_ptr<const Tokenizer> tokenizer_or_default(const py::object& tokenizer,
                                                      const Model& model) {
  if (tokenizer.is_none())
    return std::shared_ptr<const Tokenizer>(default_tokenizer_for_vocab(model.geometry().vocab));
  return object_arg<TokenizerBox>(tokenizer, "tokenizer", "a wick.Tokenizer or None").tokenizer;
}

EmbedTask parse_task(const std::string& t) {
  if (t == "retr") return EmbedTask::kRetrieval;
  if (t == "sts") return EmbedTask::kSimilarity;
  if (t == "cls") return EmbedTask::kClassification;
  throw InputError("embed: task is \"retr\", \"sts\" or \"cls\", found \"" + t + "\"");
}

// The optional arguments of wick.embed, read while the GIL is held.
struct EmbedArgs {
  std::optional<std::string> head, task, pooling;
  int max_tokens = -1;  // -1: the format's default
  bool strict = true;
};

// The embedder `wick embed` builds for the same arguments (cli/cmd_embed.cpp): an EmbeddingRWKV
// checkpoint's task head, a head file, or none (L2 of the pooled hidden state).
Embedder make_embedder(const Model& model, std::shared_ptr<const Tokenizer> tok,
                       const EmbedArgs& a) {
  if (model.info().embedding_rwkv) {
    if (a.head)
      throw InputError("embed: " + model.info().source + " is an EmbeddingRWKV checkpoint with "
                       "its own task heads; choose one with task=\"retr\"|\"sts\"|\"cls\"");
    if (a.pooling) throw InputError("embed: EmbeddingRWKV always pools at EOS");
    return Embedder::embedding_rwkv(model, std::move(tok), model.info().source,
                                    parse_task(a.task.value_or("retr")),
                                    a.max_tokens < 0 ? 0 : a.max_tokens);
  }
  if (a.task)
    throw InputError("embed: task selects a task head of an EmbeddingRWKV checkpoint; " +
                     model.info().source + " is not one (give a head file, or no head)");
  Embedder::Overrides overrides;
  if (a.pooling) {
    if (*a.pooling != "last" && *a.pooling != "mean")
      throw InputError("embed: pooling is \"last\" or \"mean\", found \"" + *a.pooling + "\"");
    overrides.pooling = *a.pooling == "mean" ? Pooling::kMean : Pooling::kLast;
  }
  if (a.max_tokens >= 0) overrides.max_tokens = a.max_tokens;
  if (!a.head) {
    EmbedContract contract;
    if (overrides.pooling) contract.pooling = *overrides.pooling;
    if (overrides.max_tokens) contract.max_tokens = *overrides.max_tokens;
    return Embedder::plain(model, std::move(tok), contract);
  }
  return Embedder::with_head(model, std::move(tok), *a.head, a.strict, overrides);
}

}  // namespace

void register_tasks(py::module_& m) {
  m.def(
      "embed",
      [](const ModelBox& model, const py::object& tokenizer, const py::object& texts,
         const py::object& head, const py::object& task, const py::object& pooling,
         const py::object& max_tokens, int batch, bool strict) {
        const std::vector<std::string> t = string_list(texts, "embed(texts)");
        EmbedArgs a;
        if (!head.is_none()) a.head = path_arg(head, "embed(head)");
        if (!task.is_none()) a.task = task.cast<std::string>();
        if (!pooling.is_none()) a.pooling = pooling.cast<std::string>();
        if (!max_tokens.is_none()) a.max_tokens = max_tokens.cast<int>();
        a.strict = strict;
        const std::shared_ptr<const Tokenizer> tok = tokenizer_or_default(tokenizer, model.model);
        std::vector<float> vectors;
        int64_t dim = 0;
        {
          py::gil_scoped_release release;
          const Embedder e = make_embedder(model.model, tok, a);
          dim = e.dim();
          vectors = e.embed(t, batch);
        }
        return owned_array(std::move(vectors), {static_cast<int64_t>(t.size()), dim});
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("texts"), py::arg("head") = py::none(),
      py::arg("task") = py::none(), py::arg("pooling") = py::none(),
      py::arg("max_tokens") = py::none(), py::arg("batch") = 8, py::arg("strict") = true,
      "L2-normalised embeddings, float32 [N, C], of a str or a list of str, as `wick embed`: "
      "an EmbeddingRWKV checkpoint uses its task head (task \"retr\" | \"sts\" | \"cls\"), "
      "head= a SwiftRWKV / rwkv-metal head file, neither: L2 of the pooled hidden state "
      "(pooling \"last\" | \"mean\"). Texts never affect each other (no padding).");

  m.def(
      "rerank",
      [](const ModelBox& model, const py::object& tokenizer, const py::object& head,
         const std::string& query, const py::object& documents, const py::object& top_n,
         int batch, bool strict) {
        const std::vector<std::string> docs = string_list(documents, "rerank(documents)");
        const std::string head_path = path_arg(head, "rerank(head)");
        const std::shared_ptr<const Tokenizer> tok = tokenizer_or_default(tokenizer, model.model);
        std::vector<RerankResult> ranked;
        {
          py::gil_scoped_release release;
          const Reranker r = Reranker::load(model.model, tok, head_path, strict);
          ranked = r.rank(r.score(query, docs, batch));
        }
        py::list out;
        const size_t n = top_n.is_none() ? ranked.size()
                                         : std::min(ranked.size(), top_n.cast<size_t>());
        for (size_t i = 0; i < n; ++i) {
          py::dict d;
          d["index"] = ranked[i].index;
          d["score"] = ranked[i].score;
          d["logit"] = ranked[i].logit;
          out.append(d);
        }
        return out;
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("head"), py::arg("query"),
      py::arg("documents"), py::arg("top_n") = py::none(), py::arg("batch") = 8,
      py::arg("strict") = true,
      "Scores documents against a query with a reranker head (rwkv-metal / SwiftRWKV "
      "safetensors or an EmbeddingRWKV reranker .pth) as `wick rerank`: a list of {index, "
      "score, logit} sorted by descending logit (ties by index); score = sigmoid(logit) for "
      "EmbeddingRWKV heads, else the logit.");

  m.def(
      "perplexity",
      [](const ModelBox& model, const py::object& tokenizer, const std::string& text, int ctx,
         int64_t max_windows, bool recurrent) {
        const std::shared_ptr<const Tokenizer> tok = tokenizer_or_default(tokenizer, model.model);
        PerplexityResult r;
        {
          py::gil_scoped_release release;
          WindowOptions w;
          w.ctx = ctx;
          w.max_windows = max_windows;
          r = perplexity(model.model, *tok, text, w,
                         recurrent ? ScoringPass::kRecurrent : ScoringPass::kParallel);
        }
        py::dict d;
        d["ppl"] = r.ppl;
        d["mean_nll"] = r.mean_nll;
        d["tokens_scored"] = r.tokens_scored;
        d["windows"] = r.windows;
        return d;
      },
      py::arg("model"), py::arg("tokenizer"), py::arg("text"), py::arg("ctx") = 512,
      py::arg("max_windows") = 0, py::arg("recurrent") = false,
      "Perplexity of the model on a text as `wick ppl`: consecutive windows of ctx tokens, each "
      "from a zero state, the last partial window dropped. Returns {ppl, mean_nll (nats per "
      "token), tokens_scored, windows}. Raises wick.InputError (text shorter than one window), "
      "wick.EvaluationError.");
}

}  // namespace wick::py_binding
