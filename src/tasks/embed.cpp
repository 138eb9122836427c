// The embedder of docs/tasks.md §6: token contract, packed passes, pooling, residual head, L2.
#include "wick/embed.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "io/safetensors_writer.h"
#include "kernels/norm.h"
#include "model/linear.h"
#include "runtime/runtime_impl.h"
#include "tasks/head_file.h"
#include "wick/errors.h"

namespace wick {

struct Embedder::Impl {
  explicit Impl(Model m) : model(std::move(m)) {}
  Model model;
  std::shared_ptr<const Tokenizer> tokenizer;
  EmbedContract contract;
  // Residual head (absent for "no head").
  std::unique_ptr<model::DenseLinear> fc1;  // [hidden, C]
  std::unique_ptr<model::DenseLinear> fc2;  // [C, hidden]
  std::vector<float> norm_w, norm_b;        // [C]
};

namespace {

constexpr int32_t kEmbeddingRwkvEos = 65535;
constexpr double kLayerNormEps = 1e-5;

void check_terminator(const EmbedContract& c, const Model& m) {
  if (c.terminator && (*c.terminator < 0 || *c.terminator >= m.geometry().vocab)) {
    throw InputError("embedding terminator id " + std::to_string(*c.terminator) +
                     " is outside the model's vocabulary [0, " +
                     std::to_string(m.geometry().vocab) + ")");
  }
  if (c.max_tokens < 0) throw InputError("max_tokens must not be negative (0 = no limit)");
  if (c.max_tokens == 1 && c.terminator && c.truncate)
    throw InputError("max_tokens = 1 leaves no room for text before the terminator");
}

void load_residual_head(Embedder::Impl& e, const io::TensorSet& set, const std::string& fc1,
                        const std::string& fc2, const std::string& norm_w,
                        const std::string& norm_b, std::optional<int64_t> hidden_meta) {
  const int64_t C = e.model.geometry().n_embd;
  const std::vector<int64_t>& s = tasks::head_shape(set, fc1);
  if (s.size() != 2 || s[1] != C || s[0] <= 0) {
    throw CheckpointError(set.source(),
                          "tensor '" + fc1 + "': expected shape [hidden, " + std::to_string(C) +
                              "] (the model width is " + std::to_string(C) + "), found " +
                              base::shape_string(s) + "; the head belongs to another base");
  }
  const int64_t hidden = s[0];
  if (hidden_meta && *hidden_meta != hidden) {
    throw CheckpointError(set.source(), "metadata 'hidden' = " + std::to_string(*hidden_meta) +
                                            " but " + fc1 + " has " + std::to_string(hidden) +
                                            " rows");
  }
  e.fc1 =
      model::DenseLinear::owned_f32(tasks::head_matrix(set, fc1, hidden, C, "head fc1"), hidden, C);
  e.fc2 =
      model::DenseLinear::owned_f32(tasks::head_matrix(set, fc2, C, hidden, "head fc2"), C, hidden);
  e.norm_w = tasks::head_vector(set, norm_w, C, "head LayerNorm weight");
  e.norm_b = tasks::head_vector(set, norm_b, C, "head LayerNorm bias");
}

Pooling parse_pooling(const std::string& v, const std::string& path) {
  if (v == "last") return Pooling::kLast;
  if (v == "mean") return Pooling::kMean;
  throw CheckpointError(path, "metadata 'pooling': expected last or mean, found '" + v + "'");
}

std::string pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kLast:
      return "last";
    case Pooling::kMean:
      return "mean";
    case Pooling::kEosMean:
      return "eos-mean";
  }
  return "?";
}

}  // namespace

Embedder Embedder::plain(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                         EmbedContract contract) {
  if (!tokenizer) throw InputError("Embedder: no tokenizer given");
  auto impl = std::make_shared<Impl>(std::move(model));
  impl->tokenizer = std::move(tokenizer);
  impl->contract = contract;
  check_terminator(impl->contract, impl->model);
  return Embedder(std::move(impl));
}

Embedder Embedder::with_head(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                             const std::string& head_path, bool strict,
                             const Overrides& overrides) {
  if (!tokenizer) throw InputError("Embedder: no tokenizer given");
  auto impl = std::make_shared<Impl>(std::move(model));
  impl->tokenizer = std::move(tokenizer);
  const io::TensorSet set = tasks::read_head_file(head_path);
  const std::optional<std::string> format = tasks::meta(set, "format");
  const int64_t C = impl->model.geometry().n_embd;
  const int vocab = impl->model.geometry().vocab;
  EmbedContract c;
  if (set.find("head.fc1")) {  // SwiftRWKV layout
    const bool marked = format && format->rfind("swiftrwkv-embedding-head", 0) == 0;
    if (!marked && strict) {
      throw CheckpointError(head_path,
                            "embedding head without the format marker (metadata "
                            "'format' = swiftrwkv-embedding-head-v1, found " +
                                (format ? "'" + *format + "'" : std::string("none")) +
                                "); load it non-strictly (wick embed --non-strict)");
    }
    if (std::optional<int64_t> dim = tasks::meta_int(set, "dim"); dim && *dim != C) {
      throw CheckpointError(head_path, "metadata 'dim' = " + std::to_string(*dim) +
                                           " but the model width is " + std::to_string(C) +
                                           "; the head belongs to another base");
    }
    load_residual_head(*impl, set, "head.fc1", "head.fc2", "head.norm.weight", "head.norm.bias",
                       tasks::meta_int(set, "hidden"));
    std::optional<Pooling> recorded;
    if (std::optional<std::string> p = tasks::meta(set, "pooling"); p && !p->empty())
      recorded = parse_pooling(*p, head_path);
    if (recorded) c.pooling = *recorded;
    if (std::optional<std::string> t = tasks::meta(set, "terminator")) {
      if (t->empty() || *t == "none" || *t == "None") {
        c.terminator = std::nullopt;
      } else {
        const int64_t id = *tasks::meta_int(set, "terminator");
        if (id < 0 || id >= vocab) {
          throw CheckpointError(head_path, "metadata 'terminator' = " + *t +
                                               " is outside the model's vocabulary [0, " +
                                               std::to_string(vocab) + ")");
        }
        c.terminator = static_cast<int32_t>(id);
      }
    }
    if (std::optional<std::string> m = tasks::meta(set, "max_tokens")) {
      if (m->empty() || *m == "none" || *m == "None") {
        c.max_tokens = 0;
      } else {
        const int64_t v = *tasks::meta_int(set, "max_tokens");
        if (v < 0 || v > (int64_t{1} << 30)) {
          throw CheckpointError(head_path,
                                "metadata 'max_tokens' = " + *m + ": expected 0 .. 2^30 (or none)");
        }
        c.max_tokens = static_cast<int>(v);
      }
    }
    if (overrides.pooling && recorded && *overrides.pooling != *recorded) {
      throw CheckpointError(head_path, "the head was trained with pooling '" +
                                           pooling_name(*recorded) + "', but '" +
                                           pooling_name(*overrides.pooling) + "' was requested");
    }
    if (overrides.pooling) c.pooling = *overrides.pooling;
  } else if (set.find("head.fc1.weight")) {  // rwkv-metal names, no metadata
    if (strict || !overrides.pooling) {
      throw CheckpointError(head_path,
                            "embedding head in rwkv-metal's layout (head.fc1.weight, "
                            "no metadata) carries no serving contract; load it "
                            "non-strictly and give the pooling explicitly (wick embed "
                            "--non-strict --pooling last|mean)");
    }
    load_residual_head(*impl, set, "head.fc1.weight", "head.fc2.weight", "head.norm.weight",
                       "head.norm.bias", std::nullopt);
    c.pooling = *overrides.pooling;
  } else {
    throw CheckpointError(head_path,
                          "is not an embedding head: expected head.fc1 / head.fc2 / "
                          "head.norm.* (SwiftRWKV) or head.fc1.weight ... (rwkv-metal)");
  }
  if (overrides.max_tokens) c.max_tokens = *overrides.max_tokens;
  impl->contract = c;
  check_terminator(impl->contract, impl->model);
  return Embedder(std::move(impl));
}

Embedder Embedder::embedding_rwkv(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                                  const std::string& checkpoint_path, EmbedTask task,
                                  int max_tokens) {
  if (!tokenizer) throw InputError("Embedder: no tokenizer given");
  auto impl = std::make_shared<Impl>(std::move(model));
  impl->tokenizer = std::move(tokenizer);
  if (impl->model.geometry().vocab <= kEmbeddingRwkvEos) {
    throw CheckpointError(checkpoint_path,
                          "EmbeddingRWKV appends EOS id 65535, but the model's "
                          "vocabulary has " +
                              std::to_string(impl->model.geometry().vocab) + " rows");
  }
  const io::TensorSet set = tasks::read_head_file(checkpoint_path);
  if (!set.find("rwkv.emb.weight")) {
    throw CheckpointError(checkpoint_path,
                          "is not an EmbeddingRWKV checkpoint (no rwkv.emb.weight); "
                          "use a head file (--head) or no head instead");
  }
  const char* name = task == EmbedTask::kRetrieval    ? "retr"
                     : task == EmbedTask::kSimilarity ? "sts"
                                                      : "cls";
  const std::string p = std::string("head.") + name + "_head.";
  load_residual_head(*impl, set, p + "fc1.weight", p + "fc2.weight", p + "norm.weight",
                     p + "norm.bias", std::nullopt);
  if (impl->fc1->out_features() != impl->model.geometry().n_embd) {
    throw CheckpointError(checkpoint_path, p + "fc1.weight: expected [C, C]");
  }
  impl->contract.pooling = Pooling::kEosMean;
  impl->contract.terminator = kEmbeddingRwkvEos;
  impl->contract.max_tokens = max_tokens;
  impl->contract.truncate = false;
  check_terminator(impl->contract, impl->model);
  return Embedder(std::move(impl));
}

const Model& Embedder::model() const {
  return impl_->model;
}
const EmbedContract& Embedder::contract() const {
  return impl_->contract;
}
bool Embedder::has_head() const {
  return impl_->fc1 != nullptr;
}
int Embedder::dim() const {
  return impl_->model.geometry().n_embd;
}

std::vector<int32_t> Embedder::tokens(std::string_view text) const {
  const EmbedContract& c = impl_->contract;
  std::vector<int32_t> ids = impl_->tokenizer->encode(text);
  const size_t total = ids.size() + (c.terminator ? 1 : 0);
  if (c.max_tokens > 0 && total > static_cast<size_t>(c.max_tokens)) {
    if (!c.truncate) {
      throw InputError("text of " + std::to_string(total) + " tokens (terminator included) is " +
                       "longer than the limit of " + std::to_string(c.max_tokens) +
                       " tokens; this format does not truncate: shorten the text or raise the "
                       "limit (--max-tokens)");
    }
    ids.resize(static_cast<size_t>(c.max_tokens) - (c.terminator ? 1 : 0));  // keep the head
  }
  if (c.terminator) ids.push_back(*c.terminator);
  return ids;
}

std::vector<float> Embedder::pooled(std::span<const std::vector<int32_t>> ids, int batch,
                                    const ProgressFn& progress) const {
  const Impl& e = *impl_;
  const int64_t C = dim();
  const Pooling pooling = e.contract.pooling;
  // Every text checked before any pass, so an error names the text and nothing is half done.
  const int vocab = e.model.geometry().vocab;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<int32_t>& t = ids[i];
    if (t.empty()) {
      throw InputError("text " + std::to_string(i) +
                       " has no tokens (an empty text and no terminator): nothing to embed");
    }
    for (int32_t id : t) {
      if (id < 0 || id >= vocab) {
        throw InputError("text " + std::to_string(i) + ": token id " + std::to_string(id) +
                         " is outside the model's vocabulary [0, " + std::to_string(vocab) +
                         "); was the tokenizer made for another model?");
      }
    }
    if (pooling == Pooling::kEosMean &&
        std::find(t.begin(), t.end(), kEmbeddingRwkvEos) == t.end()) {
      throw InputError("text " + std::to_string(i) +
                       " has no EOS token (65535): EmbeddingRWKV pools the hidden states at EOS "
                       "positions");
    }
  }
  std::vector<float> out;
  out.reserve(ids.size() * C);
  const size_t step = static_cast<size_t>(std::max(batch, 1));
  for (size_t b0 = 0; b0 < ids.size(); b0 += step) {
    const size_t n = std::min(step, ids.size() - b0);
    std::vector<std::span<const int32_t>> seqs;
    for (size_t i = 0; i < n; ++i) seqs.emplace_back(ids[b0 + i]);
    std::vector<State> states(n, e.model.new_state());
    std::vector<State*> ptrs;
    for (State& s : states) ptrs.push_back(&s);
    if (pooling == Pooling::kLast) {
      const std::vector<float> h = e.model.hidden_batch(seqs, ptrs);
      out.insert(out.end(), h.begin(), h.end());
      if (progress) progress(static_cast<int64_t>(b0 + n), static_cast<int64_t>(ids.size()));
      continue;
    }
    const std::vector<float> h = e.model.hidden_batch(seqs, ptrs, /*all_positions=*/true);
    int64_t row = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> sum(static_cast<size_t>(C), 0.0);
      int64_t count = 0;
      for (size_t t = 0; t < seqs[i].size(); ++t, ++row) {
        if (pooling == Pooling::kEosMean && seqs[i][t] != kEmbeddingRwkvEos) continue;
        for (int64_t c = 0; c < C; ++c) sum[c] += h[row * C + c];
        ++count;
      }
      for (int64_t c = 0; c < C; ++c) out.push_back(static_cast<float>(sum[c] / count));
    }
    if (progress) progress(static_cast<int64_t>(b0 + n), static_cast<int64_t>(ids.size()));
  }
  return out;
}

std::vector<float> Embedder::finish(std::span<const float> pooled_rows) const {
  const Impl& e = *impl_;
  const int64_t C = dim();
  if (pooled_rows.size() % static_cast<size_t>(C) != 0) {
    throw InputError("finish: " + std::to_string(pooled_rows.size()) +
                     " floats are not whole rows of width " + std::to_string(C));
  }
  const int64_t N = static_cast<int64_t>(pooled_rows.size()) / C;
  std::vector<float> y(pooled_rows.begin(), pooled_rows.end());
  if (e.fc1) {
    const int64_t hidden = e.fc1->out_features();
    std::vector<float> h(static_cast<size_t>(N * hidden)), r(static_cast<size_t>(N * C));
    RuntimeLease lease(*e.model.runtime());
    e.fc1->apply(pooled_rows.data(), N, h.data(), lease.pool());
    for (float& v : h) v = v > 0.f ? v : 0.f;
    e.fc2->apply(h.data(), N, r.data(), lease.pool());
    for (int64_t i = 0; i < N * C; ++i) r[i] += pooled_rows[i];
    for (int64_t i = 0; i < N; ++i)
      kernels::layer_norm(r.data() + i * C, e.norm_w.data(), e.norm_b.data(), y.data() + i * C, C,
                          kLayerNormEps);
  }
  for (int64_t i = 0; i < N; ++i) {
    float* row = y.data() + i * C;
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(row[c]) * row[c];
    const double inv = 1.0 / std::sqrt(ss + 1e-12);
    for (int64_t c = 0; c < C; ++c) row[c] = static_cast<float>(row[c] * inv);
  }
  return y;
}

std::vector<float> Embedder::embed_tokens(std::span<const std::vector<int32_t>> ids, int batch,
                                          const ProgressFn& progress) const {
  return finish(pooled(ids, batch, progress));
}

std::vector<float> Embedder::embed(std::span<const std::string> texts, int batch,
                                   const ProgressFn& progress) const {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      ids.push_back(tokens(texts[i]));
    } catch (const InputError& e) {
      throw InputError("text " + std::to_string(i) + ": " + e.what());
    }
  }
  return embed_tokens(ids, batch, progress);
}

void save_embeddings(const std::string& path, std::span<const float> vectors, int64_t n,
                     int64_t dim, std::map<std::string, std::string> metadata) {
  if (n < 0 || dim <= 0 || vectors.size() != static_cast<size_t>(n * dim)) {
    throw InputError("save_embeddings: " + std::to_string(vectors.size()) +
                     " floats do not form [" + std::to_string(n) + ", " + std::to_string(dim) +
                     "]");
  }
  metadata["format"] = "wick-embeddings-v1";
  io::write_safetensors(path,
                        {{"embeddings",
                          DType::F32,
                          {n, dim},
                          std::string_view(reinterpret_cast<const char*>(vectors.data()),
                                           vectors.size() * sizeof(float))}},
                        metadata);
}

float cosine_of_normalised(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size())
    throw InputError("cosine of vectors of different lengths (" + std::to_string(a.size()) +
                     " and " + std::to_string(b.size()) + ")");
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

}  // namespace wick
