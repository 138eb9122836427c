// Reranker heads of docs/tasks.md §5 (rwkv-metal / SwiftRWKV head files) and §5.8
// (EmbeddingRWKV reranker .pth): loading both into one representation (an x070 block stack run
// by Model, plus the scoring MLP) and the direct and indexed scoring paths.
#include "wick/rerank.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "model/linear.h"
#include "model/model_impl.h"
#include "model/state_geometry.h"
#include "runtime/runtime_impl.h"
#include "tasks/head_file.h"
#include "wick/errors.h"

namespace wick {

struct Reranker::Impl {
  explicit Impl(Model m) : base(std::move(m)) {}
  Model base;
  std::shared_ptr<const Tokenizer> tokenizer;
  RerankFormat format = RerankFormat::kHeadV1;
  RerankContract contract;
  std::optional<Model> head;                // the head's x070 blocks; "vocabulary" = the probe rows
  std::vector<int> sources;                 // base layer read by each head block
  std::vector<int32_t> probe_ids;           // 0 .. n_probe-1
  std::unique_ptr<model::DenseLinear> fc1;  // [hidden, C]
  std::vector<float> fc1_bias;              // [hidden]
  std::vector<float> fc2;                   // [hidden] (fc2 is [1, hidden])
};

namespace {

using tasks::head_matrix;
using tasks::head_shape;
using tasks::head_vector;
using tasks::meta;
using tasks::meta_int;

constexpr int32_t kEmbeddingRwkvEos = 65535;
constexpr const char* kHeadV1Instruct =
    "Given a search query, retrieve relevant passages that answer the query";
constexpr const char* kEmbeddingRwkvInstruct =
    "Given a query, retrieve documents that answer the query";

// Normalises layer indices against a base of L layers (negatives count from the end).
std::vector<int> normalise_layers(const std::vector<int64_t>& raw, int L, const std::string& path,
                                  const std::string& key) {
  if (raw.empty())
    throw CheckpointError(path, "metadata '" + key + "': expected at least one layer");
  std::vector<int> out;
  for (int64_t v : raw) {
    const int64_t n = v < 0 ? v + L : v;
    if (n < 0 || n >= L) {
      throw CheckpointError(path, "metadata '" + key + "': layer " + std::to_string(v) +
                                      " is outside the base's " + std::to_string(L) +
                                      " layers (expected -" + std::to_string(L) + " .. " +
                                      std::to_string(L - 1) + ")");
    }
    out.push_back(static_cast<int>(n));
  }
  return out;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& path,
                                    const std::string& key) {
  // Accepts "1,3", "[1, 3]" (JSON, as the .pth reader renders a pickled list) and "1".
  std::string s = text;
  for (char& c : s)
    if (c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(s);
  std::vector<int64_t> out;
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size()) {
      throw CheckpointError(
          path, "metadata '" + key + "': expected a list of layer indices, found '" + text + "'");
    }
    out.push_back(v);
  }
  return out;
}

void check_head_geometry(const Geometry& head, const Geometry& base, const std::string& path) {
  if (head.n_embd != base.n_embd || head.n_head != base.n_head ||
      head.head_size != base.head_size) {
    throw CheckpointError(
        path, "reranker head geometry (" + geometry_text(StateGeometry::of(head)) +
                  ") does not match the base model (" + geometry_text(StateGeometry::of(base)) +
                  "): width, heads and head size must agree; use the head "
                  "trained for this base");
  }
}

void load_mlp(Reranker::Impl& r, const io::TensorSet& set, const std::string& fc1_name,
              const std::string& bias_name, const std::string& fc2_name, int64_t C) {
  const std::vector<int64_t>& s = head_shape(set, fc1_name);
  if (s.size() != 2 || s[0] <= 0 || s[1] != C) {
    throw CheckpointError(set.source(), "tensor '" + fc1_name + "': expected shape [hidden, " +
                                            std::to_string(C) + "], found " +
                                            base::shape_string(s));
  }
  const int64_t hidden = s[0];
  r.fc1 = model::DenseLinear::owned_f32(head_matrix(set, fc1_name, hidden, C, "score MLP fc1"),
                                        hidden, C);
  r.fc1_bias = head_vector(set, bias_name, hidden, "score MLP fc1 bias");
  r.fc2 = head_matrix(set, fc2_name, 1, hidden, "score MLP fc2");
}

// rwkv-metal / SwiftRWKV head (docs/tasks.md §5.4, §5.5).
void load_head_v1(Reranker::Impl& r, const io::TensorSet& set, bool strict) {
  const std::string& path = set.source();
  const Geometry& bg = r.base.geometry();
  const std::optional<std::string> format = meta(set, "format");
  if (!format || format->rfind("rwkv-metal-reranker-head", 0) != 0) {
    if (strict) {
      throw CheckpointError(path,
                            "reranker head without the format marker (metadata 'format' = "
                            "rwkv-metal-reranker-head-v1, found " +
                                (format ? "'" + *format + "'" : std::string("none")) +
                                "); load it non-strictly to use it with the default "
                                "contract");
    }
  }
  // The block stack as an x070 model: probe rows = its vocabulary.
  io::TensorSet blocks(path);
  for (const io::TensorView& t : set.tensors()) {
    if (t.name.rfind("score_fc", 0) == 0) continue;
    io::TensorView v = t;
    if (t.name == "probe") v.name = "emb.weight";
    const std::string_view rk_suffix = ".tmix.r_k";
    const bool is_rk =
        t.name.size() > rk_suffix.size() &&
        std::string_view(t.name).substr(t.name.size() - rk_suffix.size()) == rk_suffix;
    // r_k written as [D] (or [1, 1, D]): the head shape of the base (the loader derives H and N
    // from r_k's [H, N], which a flat vector does not carry).
    if (is_rk && t.numel() == bg.n_embd && (t.shape.size() != 2 || t.shape[0] == 1))
      v.shape = {bg.n_head, bg.head_size};
    blocks.add(std::move(v));
  }
  for (const auto& f : set.files()) blocks.keep_alive(f);
  if (!set.find("probe")) throw CheckpointError(path, "missing tensor 'probe' [n_probe, C]");
  model::BuildOptions options;
  options.require_head = false;
  // The head's blocks run at the base model's precision (Model::precision).
  r.head = model::model_from_tensors(std::move(blocks), options).with_precision(r.base.precision());
  const Geometry& hg = r.head->geometry();
  check_head_geometry(hg, bg, path);
  load_mlp(r, set, "score_fc1.weight", "score_fc1.bias", "score_fc2.weight", bg.n_embd);

  // Metadata written with the head (checked against the file and the base).
  auto check_equal = [&](const char* key, std::optional<int64_t> v, int64_t actual,
                         const std::string& what) {
    if (v && *v != actual) {
      throw CheckpointError(path, std::string("metadata '") + key + "' = " + std::to_string(*v) +
                                      " but " + what + " is " + std::to_string(actual) +
                                      "; the head was trained for another base or is damaged");
    }
  };
  if (strict) {
    check_equal("base_n_layer", meta_int(set, "base_n_layer"), bg.n_layer,
                "the base model's layer count");
    check_equal("base_n_embd", meta_int(set, "base_n_embd"), bg.n_embd, "the base model's width");
    check_equal("base_n_head", meta_int(set, "base_n_head"), bg.n_head,
                "the base model's head count");
  }
  check_equal("n_probe", meta_int(set, "n_probe"), hg.vocab, "the probe table's row count");
  check_equal("head_hidden", meta_int(set, "head_hidden"), r.fc1->out_features(),
              "score_fc1's width");
  std::vector<int64_t> raw = {-1};  // §5.2 default when the key is absent
  if (std::optional<std::string> li = meta(set, "layer_idx")) {
    raw = parse_int_list(*li, path, "layer_idx");  // empty -> error below
  }
  std::vector<int> layers = normalise_layers(raw, bg.n_layer, path, "layer_idx");
  if (static_cast<int>(layers.size()) != hg.n_layer) {
    throw CheckpointError(path, "metadata 'layer_idx' lists " + std::to_string(layers.size()) +
                                    " layers but the head has " + std::to_string(hg.n_layer) +
                                    " blocks: expected one base layer per head block");
  }
  bool shared = false;
  if (std::optional<std::string> ss = meta(set, "shared_state"); ss && !ss->empty()) {
    if (*ss != "0" && *ss != "1" && *ss != "true" && *ss != "false") {
      throw CheckpointError(path, "metadata 'shared_state': expected 1 or 0, found '" + *ss + "'");
    }
    shared = *ss == "1" || *ss == "true";
  }
  if (shared) std::fill(layers.begin(), layers.end(), layers.back());
  r.sources = layers;

  // Serving contract (§5.5): either spelling of the order and of "no terminator".
  RerankContract& c = r.contract;
  c.doc_first = true;
  if (std::optional<std::string> t = meta(set, "template"); t && !t->empty()) {
    if (*t != "doc_first" && *t != "query_first") {
      throw CheckpointError(
          path, "metadata 'template': expected doc_first or query_first, found '" + *t + "'");
    }
    c.doc_first = *t == "doc_first";
  } else if (std::optional<std::string> d = meta(set, "doc_first"); d && !d->empty()) {
    if (*d != "0" && *d != "1" && *d != "true" && *d != "false") {
      throw CheckpointError(path, "metadata 'doc_first': expected 1 or 0, found '" + *d + "'");
    }
    c.doc_first = *d == "1" || *d == "true";
  }
  const std::optional<std::string> instruct = meta(set, "instruct");
  c.instruct = instruct ? *instruct : kHeadV1Instruct;
  const std::optional<int64_t> md = meta_int(set, "max_doc_tokens");
  const std::optional<int64_t> mq = meta_int(set, "max_query_tokens");
  if ((md && *md < 0) || (mq && *mq < 0))
    throw CheckpointError(path, "metadata max_doc_tokens / max_query_tokens must not be negative");
  constexpr int64_t kMaxTokens = int64_t{1} << 30;
  if ((md && *md > kMaxTokens) || (mq && *mq > kMaxTokens)) {
    throw CheckpointError(path,
                          "metadata max_doc_tokens / max_query_tokens above 2^30; use 0 "
                          "for no truncation");
  }
  c.max_doc_tokens = md ? static_cast<int>(*md) : 384;
  c.max_query_tokens = mq ? static_cast<int>(*mq) : 96;
  c.terminator = 0;
  if (std::optional<std::string> t = meta(set, "terminator")) {
    if (t->empty() || *t == "none" || *t == "None") {
      c.terminator = std::nullopt;
    } else {
      const int64_t id = *meta_int(set, "terminator");
      if (id < 0 || id >= r.base.geometry().vocab) {
        throw CheckpointError(path, "metadata 'terminator' = " + *t +
                                        " is outside the base vocabulary [0, " +
                                        std::to_string(r.base.geometry().vocab) + ")");
      }
      c.terminator = static_cast<int32_t>(id);
    }
  }
}

// EmbeddingRWKV state-based reranker (docs/tasks.md §5.8).
void load_embedding_rwkv(Reranker::Impl& r, const io::TensorSet& set, bool strict) {
  const std::string& path = set.source();
  const Geometry& bg = r.base.geometry();
  if (strict && !r.base.info().embedding_rwkv) {
    throw CheckpointError(path,
                          "an EmbeddingRWKV reranker reads the states of its paired "
                          "EmbeddingRWKV embedding model, but the base (" +
                              r.base.info().source +
                              ") is not an EmbeddingRWKV checkpoint; load that model as "
                              "the base (or load non-strictly to try another one)");
  }
  if (bg.vocab <= kEmbeddingRwkvEos) {
    throw CheckpointError(path,
                          "an EmbeddingRWKV reranker needs a base with the EOS row 65535, "
                          "but the base vocabulary has " +
                              std::to_string(bg.vocab) +
                              " rows; use its paired EmbeddingRWKV embedding model");
  }
  io::TensorSet blocks(path);
  for (const io::TensorView& t : set.tensors()) {
    if (t.name == "reranker_layer_idx") continue;
    if (t.name.rfind("reranker.", 0) != 0) {
      throw CheckpointError(path, "unknown tensor '" + t.name +
                                      "' in an EmbeddingRWKV reranker (expected reranker.* and "
                                      "reranker_layer_idx)");
    }
    std::string name = t.name.substr(9);
    if (name.rfind("head.", 0) == 0) continue;        // the scoring MLP, read below
    if (name == "token.weight") name = "emb.weight";  // older probe name
    io::TensorView v = t;
    v.name = name;
    blocks.add(std::move(v));
  }
  for (const auto& f : set.files()) blocks.keep_alive(f);
  model::BuildOptions options;
  options.require_head = false;
  // The head's blocks run at the base model's precision (Model::precision).
  r.head = model::model_from_tensors(std::move(blocks), options).with_precision(r.base.precision());
  const Geometry& hg = r.head->geometry();
  check_head_geometry(hg, bg, path);
  if (hg.vocab != 1) {
    throw CheckpointError(path,
                          "reranker probe (reranker.emb.weight): expected shape [1, C], found " +
                              std::to_string(hg.vocab) + " rows");
  }
  load_mlp(r, set, "reranker.head.0.weight", "reranker.head.0.bias", "reranker.head.2.weight",
           bg.n_embd);
  if (r.fc1->out_features() != bg.n_embd) {
    throw CheckpointError(
        path, "reranker.head.0.weight: expected [C, C] with C = " + std::to_string(bg.n_embd));
  }
  std::vector<int64_t> raw;
  if (const io::TensorView* t = set.find("reranker_layer_idx")) {
    if (t->dtype != DType::I64 && t->dtype != DType::I32) {
      throw CheckpointError(path, "reranker_layer_idx: expected an integer tensor, found " +
                                      std::string(dtype_name(t->dtype)));
    }
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (t->dtype == DType::I64) {
        int64_t v;
        std::memcpy(&v, t->data + 8 * i, 8);
        raw.push_back(v);
      } else {
        int32_t v;
        std::memcpy(&v, t->data + 4 * i, 4);
        raw.push_back(v);
      }
    }
  } else if (std::optional<std::string> li = meta(set, "reranker_layer_idx")) {
    raw = parse_int_list(*li, path, "reranker_layer_idx");
  } else {
    for (int i = 0; i < hg.n_layer; ++i) raw.push_back(i);  // block i reads base layer i
  }
  r.sources = normalise_layers(raw, bg.n_layer, path, "reranker_layer_idx");
  if (static_cast<int>(r.sources.size()) != hg.n_layer) {
    throw CheckpointError(path, "reranker_layer_idx lists " + std::to_string(r.sources.size()) +
                                    " layers but the reranker has " + std::to_string(hg.n_layer) +
                                    " blocks: expected exactly one base layer per block");
  }
  RerankContract& c = r.contract;
  c.doc_first = true;
  c.instruct = kEmbeddingRwkvInstruct;
  c.max_doc_tokens = 0;
  c.max_query_tokens = 0;
  c.terminator = kEmbeddingRwkvEos;
}

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view text) {
  return tok.encode(text);
}

// Every id of every sequence inside the base vocabulary, before any pass (§5.5).
void check_ids(const std::vector<std::vector<int32_t>>& seqs, size_t first, int vocab,
               const char* what) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int32_t id : seqs[i]) {
      if (id < 0 || id >= vocab) {
        throw InputError(std::string(what) + " " + std::to_string(first + i) + ": token id " +
                         std::to_string(id) + " is outside the base vocabulary [0, " +
                         std::to_string(vocab) + "); was the tokenizer made for another model?");
      }
    }
  }
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids, int limit) {
  const size_t n = limit > 0 ? std::min(ids.size(), static_cast<size_t>(limit)) : ids.size();
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

void check_indexable(const RerankContract& c) {
  if (!c.doc_first) {
    throw InputError(
        "this reranker head uses the query-first template: the document comes after "
        "the query, so document states cannot be folded ahead of the query; use the "
        "direct path (no index)");
  }
}

// Continues each state with its sequence (one packed pass) and returns the head's logits on the
// states after it: the common end of the direct path and the indexed path.
std::vector<float> continue_and_score(const Reranker& r,
                                      std::span<const std::span<const int32_t>> seqs,
                                      std::vector<State>& states) {
  std::vector<State*> ptrs;
  for (State& s : states) ptrs.push_back(&s);
  r.model().absorb_batch(seqs, ptrs);
  const std::vector<const State*> cptrs(ptrs.begin(), ptrs.end());
  return r.head_logits(cptrs);
}

}  // namespace

Reranker Reranker::load(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                        const std::string& head_path, bool strict) {
  if (!tokenizer) throw InputError("Reranker::load: no tokenizer given");
  auto impl = std::make_shared<Impl>(std::move(model));
  impl->tokenizer = std::move(tokenizer);
  const io::TensorSet set = tasks::read_head_file(head_path);
  if (set.find("reranker.blocks.0.att.r_k")) {
    impl->format = RerankFormat::kEmbeddingRWKV;
    load_embedding_rwkv(*impl, set, strict);
  } else if (set.find("blocks.0.tmix.r_k") || set.find("probe")) {
    impl->format = RerankFormat::kHeadV1;
    load_head_v1(*impl, set, strict);
  } else {
    throw CheckpointError(head_path,
                          "is not a reranker head: expected an rwkv-metal / SwiftRWKV head "
                          "(probe, blocks.N.tmix.*, score_fc1/2) or an EmbeddingRWKV reranker "
                          "(reranker.*)");
  }
  for (int i = 0; i < impl->head->geometry().vocab; ++i) impl->probe_ids.push_back(i);
  return Reranker(std::move(impl));
}

RerankFormat Reranker::format() const {
  return impl_->format;
}
const RerankContract& Reranker::contract() const {
  return impl_->contract;
}
const Model& Reranker::model() const {
  return impl_->base;
}
const Tokenizer& Reranker::tokenizer() const {
  return *impl_->tokenizer;
}
const std::vector<int>& Reranker::source_layers() const {
  return impl_->sources;
}
int Reranker::n_probe() const {
  return static_cast<int>(impl_->probe_ids.size());
}
bool Reranker::has_sigmoid() const {
  return impl_->format == RerankFormat::kEmbeddingRWKV;
}

std::vector<int32_t> Reranker::prefix_tokens(std::string_view doc) const {
  const RerankContract& c = impl_->contract;
  const Tokenizer& tok = *impl_->tokenizer;
  if (impl_->format == RerankFormat::kEmbeddingRWKV) {
    // Tokenized whole: the document's last character may merge with the newline (§5.8).
    return encode(tok, "Instruct: " + c.instruct + "\nDocument: " + std::string(doc) + "\n");
  }
  if (!c.doc_first) return encode(tok, "Instruct: " + c.instruct + "\n");
  std::vector<int32_t> ids = encode(tok, "Instruct: " + c.instruct + "\nDocument: ");
  append(ids, encode(tok, doc), c.max_doc_tokens);
  append(ids, encode(tok, "\n"), 0);
  return ids;
}

std::vector<int32_t> Reranker::tail_tokens(std::string_view query, std::string_view doc) const {
  const RerankContract& c = impl_->contract;
  const Tokenizer& tok = *impl_->tokenizer;
  std::vector<int32_t> ids;
  if (impl_->format == RerankFormat::kEmbeddingRWKV) {
    ids = encode(tok, "Query: " + std::string(query));
  } else {
    ids = encode(tok, "Query: ");
    append(ids, encode(tok, query), c.max_query_tokens);
    if (!c.doc_first) {
      append(ids, encode(tok, "\nDocument: "), 0);
      append(ids, encode(tok, doc), c.max_doc_tokens);
    }
  }
  if (c.terminator) ids.push_back(*c.terminator);
  return ids;
}

std::vector<float> Reranker::head_logits(std::span<const State* const> pair_states) const {
  const Impl& r = *impl_;
  const Geometry& bg = r.base.geometry();
  const Geometry& hg = r.head->geometry();
  const size_t B = pair_states.size();
  if (B == 0) return {};
  std::vector<State> head_states;
  head_states.reserve(B);
  for (size_t b = 0; b < B; ++b) {
    const State* s = pair_states[b];
    if (!s)
      throw InputError("pair state " + std::to_string(b) +
                       " is null: pass states the reranker's base model produced");
    if (!state_fits(*s, bg))
      throw_state_mismatch(StateGeometry::of(*s), bg, "pair state " + std::to_string(b));
    State h(hg.n_layer, hg.n_embd, hg.n_head, hg.head_size);  // zero token shifts
    for (int i = 0; i < hg.n_layer; ++i) std::copy_n(s->wkv(r.sources[i]), s->wkv_size(), h.wkv(i));
    head_states.push_back(std::move(h));
  }
  std::vector<std::span<const int32_t>> seqs(B, std::span<const int32_t>(r.probe_ids));
  std::vector<State*> ptrs;
  for (State& h : head_states) ptrs.push_back(&h);
  const std::vector<float> y = r.head->hidden_batch(seqs, ptrs);  // [B, C] after ln_out
  const int64_t hidden = r.fc1->out_features();
  std::vector<float> h(static_cast<size_t>(B) * hidden);
  {
    RuntimeLease lease(*r.head->runtime());
    r.fc1->apply(y.data(), static_cast<int64_t>(B), h.data(), lease.pool());
  }
  std::vector<float> logits(B);
  for (size_t b = 0; b < B; ++b) {
    float s = 0.f;
    for (int64_t j = 0; j < hidden; ++j)
      s += r.fc2[j] * std::tanh(h[b * hidden + j] + r.fc1_bias[j]);
    logits[b] = s;
  }
  return logits;
}

std::vector<float> Reranker::score(std::string_view query, std::span<const std::string> docs,
                                   int batch, const ProgressFn& progress) const {
  std::vector<std::vector<int32_t>> all(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    all[i] = prefix_tokens(docs[i]);
    const std::vector<int32_t> tail = tail_tokens(query, docs[i]);
    all[i].insert(all[i].end(), tail.begin(), tail.end());
  }
  check_ids(all, 0, impl_->base.geometry().vocab, "document");
  std::vector<float> out;
  out.reserve(docs.size());
  const size_t step = static_cast<size_t>(std::max(batch, 1));
  for (size_t b0 = 0; b0 < docs.size(); b0 += step) {
    const size_t n = std::min(step, docs.size() - b0);
    std::vector<State> states(n, impl_->base.new_state());
    const std::vector<std::span<const int32_t>> seqs(all.begin() + b0, all.begin() + b0 + n);
    const std::vector<float> l = continue_and_score(*this, seqs, states);
    out.insert(out.end(), l.begin(), l.end());
    if (progress) progress(static_cast<int64_t>(out.size()), static_cast<int64_t>(docs.size()));
  }
  return out;
}

std::vector<State> Reranker::fold_documents(std::span<const std::string> docs, int batch,
                                            const ProgressFn& progress) const {
  check_indexable(impl_->contract);
  std::vector<std::vector<int32_t>> all(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) all[i] = prefix_tokens(docs[i]);
  check_ids(all, 0, impl_->base.geometry().vocab, "document");
  std::vector<State> out;
  out.reserve(docs.size());
  const size_t step = static_cast<size_t>(std::max(batch, 1));
  for (size_t b0 = 0; b0 < docs.size(); b0 += step) {
    const size_t n = std::min(step, docs.size() - b0);
    const size_t first = out.size();
    for (size_t i = 0; i < n; ++i) out.push_back(impl_->base.new_state());
    std::vector<std::span<const int32_t>> seqs(all.begin() + b0, all.begin() + b0 + n);
    std::vector<State*> ptrs;
    for (size_t i = 0; i < n; ++i) ptrs.push_back(&out[first + i]);
    impl_->base.absorb_batch(seqs, ptrs);
    if (progress) progress(static_cast<int64_t>(out.size()), static_cast<int64_t>(docs.size()));
  }
  return out;
}

std::vector<float> Reranker::score_states(std::string_view query,
                                          std::span<const State* const> doc_states, int batch,
                                          const ProgressFn& progress) const {
  check_indexable(impl_->contract);
  const std::vector<int32_t> tail = tail_tokens(query);  // once per query
  check_ids({tail}, 0, impl_->base.geometry().vocab, "query");
  std::vector<float> out;
  out.reserve(doc_states.size());
  const size_t step = static_cast<size_t>(std::max(batch, 1));
  for (size_t b0 = 0; b0 < doc_states.size(); b0 += step) {
    const size_t n = std::min(step, doc_states.size() - b0);
    std::vector<State> states;
    states.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (!doc_states[b0 + i]) throw InputError("null document state " + std::to_string(b0 + i));
      states.push_back(*doc_states[b0 + i]);  // a copy: the index is never modified
    }
    const std::vector<std::span<const int32_t>> seqs(n, std::span<const int32_t>(tail));
    const std::vector<float> l = continue_and_score(*this, seqs, states);
    out.insert(out.end(), l.begin(), l.end());
    if (progress)
      progress(static_cast<int64_t>(out.size()), static_cast<int64_t>(doc_states.size()));
  }
  return out;
}

float Reranker::score_of(float logit) const {
  if (!has_sigmoid()) return logit;
  return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logit))));
}

std::vector<RerankResult> Reranker::rank(std::span<const float> logits) const {
  std::vector<RerankResult> out;
  out.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    out.push_back({static_cast<int64_t>(i), logits[i], score_of(logits[i])});
  // Descending logit; a NaN (a broken head) sorts after every number; ties keep input order.
  std::stable_sort(out.begin(), out.end(), [](const RerankResult& a, const RerankResult& b) {
    if (std::isnan(a.logit) || std::isnan(b.logit))
      return !std::isnan(a.logit) && std::isnan(b.logit);
    return a.logit > b.logit;
  });
  return out;
}

}  // namespace wick
