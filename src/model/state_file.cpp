// State snapshot files (docs/tasks.md §3.5).
#include "wick/state_file.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "io/json_limits.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/state_geometry.h"
#include "wick/errors.h"
#include "wick/version.h"

namespace wick {
namespace {

constexpr const char* kFormatKey = "wick.state";
constexpr const char* kFormatVersion = "2";
constexpr const char* kFormatVersion1 = "1";  // before the continuation parts; still read
constexpr const char* kKindSnapshot = "snapshot";

// A non-negative integer metadata value, or `fallback` when the key is absent.
int64_t parse_count(const std::map<std::string, std::string>& meta, const char* key,
                    const std::string& path, int64_t fallback) {
  auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  const std::string& v = it->second;
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || n < 0)
    throw StateFileError(path, std::string("metadata '") + key +
                                   "' should be a non-negative integer, found '" + v + "'");
  return n;
}

std::string_view as_bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

// Metadata value that must be present.
const std::string& required(const std::map<std::string, std::string>& meta, const char* key,
                            const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw StateFileError(path, std::string("metadata key '") + key +
                                   "' is missing; the file is damaged or was not written by wick");
  return it->second;
}

int parse_dim(const std::map<std::string, std::string>& meta, const char* key,
              const std::string& path) {
  const std::string& v = required(meta, key, path);
  size_t used = 0;
  int n = -1;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || n <= 0)
    throw StateFileError(path, std::string("metadata '") + key +
                                   "' should be a positive integer, found '" + v + "'");
  return n;
}

std::string hex64(uint64_t v) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 15];
  return s;
}

// The tensors and metadata of a state file, and the buffers their bytes point into.
struct StateFileParts {
  std::vector<float> wkv_all, tmix, cmix, attn_cmix, k_all, v_all;
  std::vector<int32_t> history_ids;
  std::vector<float> history_weights;
  std::vector<io::TensorToWrite> tensors;
  std::map<std::string, std::string> meta;
};

// Format 2's continuation parts (logits, sampler) of `info`, checked as load_state() will check
// them.
void add_continuation(StateFileParts& parts, const Continuation& c, int vocab) {
  if (c.has_logits()) {
    if (c.logits.size() != static_cast<size_t>(vocab))
      throw InputError("cannot save " + std::to_string(c.logits.size()) +
                       " continuation logits for a model with a vocabulary of " +
                       std::to_string(vocab) + "; they must be the logits of this model");
    parts.tensors.push_back({"logits", DType::F32, {vocab}, as_bytes(c.logits)});
  }
  if (!c.sampler) return;
  const SamplerSnapshot& snap = *c.sampler;
  int32_t previous = -1;
  for (const auto& [id, weight] : snap.history) {
    if (id <= previous || id >= vocab || !std::isfinite(weight) || weight < 0)
      throw InputError("cannot save the sampler: its history entry (" + std::to_string(id) + ", " +
                       std::to_string(weight) + ") is not an ascending id in [0, " +
                       std::to_string(vocab) + ") with a finite weight >= 0");
    previous = id;
    parts.history_ids.push_back(id);
    parts.history_weights.push_back(weight);
  }
  const int64_t K = static_cast<int64_t>(snap.history.size());
  parts.tensors.push_back(
      {"sampler_history_ids",
       DType::I32,
       {K},
       {reinterpret_cast<const char*>(parts.history_ids.data()), parts.history_ids.size() * 4}});
  parts.tensors.push_back(
      {"sampler_history_weights", DType::F32, {K}, as_bytes(parts.history_weights)});
  parts.meta["sampler_mode"] = std::string(sampler_mode_name(snap.mode));
  parts.meta["sampler_rng"] = hex64(snap.rng_state);
}

void build_state_file(StateFileParts& parts, const State& state, const Model& model,
                      const StateFileInfo& info) {
  auto& [wkv_all, tmix, cmix, attn_cmix, k_all, v_all, history_ids, history_weights, tensors,
         meta] = parts;
  const Geometry& g = model.geometry();
  check_state_fits(state, g, "the state to save");
  const int L = g.n_layer, C = g.n_embd, H = g.n_head, N = g.head_size;
  const size_t wkv = state.wkv_size();
  wkv_all.resize(static_cast<size_t>(L) * wkv);
  tmix.resize(static_cast<size_t>(L) * C);
  cmix.resize(static_cast<size_t>(L) * C);
  for (int l = 0; l < L; ++l) {
    std::memcpy(wkv_all.data() + l * wkv, state.wkv(l), wkv * sizeof(float));
    std::memcpy(tmix.data() + static_cast<size_t>(l) * C, state.att_shift(l), C * sizeof(float));
    std::memcpy(cmix.data() + static_cast<size_t>(l) * C, state.ffn_shift(l), C * sizeof(float));
  }
  nlohmann::json contract = nlohmann::json::object();
  contract["tokenizer"] = info.tokenizer;
  contract["n_tokens"] = info.n_tokens;
  if (!info.prompt_sha256.empty()) contract["prompt_sha256"] = info.prompt_sha256;
  meta = {
      {kFormatKey, kFormatVersion},
      {"kind", kKindSnapshot},
      {"n_layer", std::to_string(L)},
      {"n_embd", std::to_string(C)},
      {"n_head", std::to_string(H)},
      {"head_size", std::to_string(N)},
      {"base_fingerprint", model.info().fingerprint},
      {"contract", contract.dump()},
      {"note", info.note},
      {"engine_version", "wick " + std::string(version())},
  };
  tensors = {{"wkv", DType::F32, {L, 1, H, N, N}, as_bytes(wkv_all)},
             {"tmix_shift", DType::F32, {L, 1, 1, C}, as_bytes(tmix)},
             {"cmix_shift", DType::F32, {L, 1, 1, C}, as_bytes(cmix)}};
  // RWKV-X: the attention blocks' channel-mix shifts and KV caches.
  const int A = g.n_attn;
  const int64_t T = state.kv_length();
  if (A > 0) {
    attn_cmix.resize(static_cast<size_t>(A) * C);
    k_all.resize(static_cast<size_t>(A * T * C));
    v_all.resize(k_all.size());
    const size_t rows = static_cast<size_t>(T * C);
    for (int j = 0; j < A; ++j) {
      std::memcpy(attn_cmix.data() + static_cast<size_t>(j) * C, state.attn_ffn_shift(j),
                  C * sizeof(float));
      if (rows) {
        std::memcpy(k_all.data() + j * rows, state.k_cache(j), rows * sizeof(float));
        std::memcpy(v_all.data() + j * rows, state.v_cache(j), rows * sizeof(float));
      }
    }
    meta["n_attn"] = std::to_string(A);
    meta["kv_length"] = std::to_string(T);
    tensors.push_back({"attn_cmix_shift", DType::F32, {A, 1, 1, C}, as_bytes(attn_cmix)});
    tensors.push_back({"attn_k_cache", DType::F32, {A, T, C}, as_bytes(k_all)});
    tensors.push_back({"attn_v_cache", DType::F32, {A, T, C}, as_bytes(v_all)});
  }
  add_continuation(parts, info.continuation, g.vocab);
}

// Format 2's continuation parts, each optional; `set` has passed the required-tensor checks.
Continuation read_continuation(const io::TensorSet& set, const std::string& path, int vocab) {
  const auto& meta = set.metadata();
  Continuation c;
  if (const io::TensorView* t = set.find("logits")) {
    if (t->dtype != DType::F32 || t->shape != std::vector<int64_t>{vocab})
      throw StateFileError(path, "tensor 'logits' should be F32 [" + std::to_string(vocab) +
                                     "] (this model's vocabulary), found " +
                                     std::string(dtype_name(t->dtype)) + " " + t->shape_string());
    bool nan = false;
    if (const int64_t i = io::first_nonfinite(*t, &nan); i >= 0)
      throw StateFileError(path, std::string("tensor 'logits' holds ") +
                                     (nan ? "NaN" : "an infinity") + " at element " +
                                     std::to_string(i) +
                                     "; expected finite values: the file is damaged");
    c.logits.resize(static_cast<size_t>(vocab));
    std::memcpy(c.logits.data(), t->data, t->nbytes);
  }
  const io::TensorView* ids = set.find("sampler_history_ids");
  const io::TensorView* weights = set.find("sampler_history_weights");
  const bool any = ids || weights || meta.count("sampler_mode") || meta.count("sampler_rng");
  if (!any) return c;
  if (!ids || !weights || !meta.count("sampler_mode") || !meta.count("sampler_rng"))
    throw StateFileError(path,
                         "the sampler part is incomplete: it needs the tensors "
                         "'sampler_history_ids' and 'sampler_history_weights' and the "
                         "metadata 'sampler_mode' and 'sampler_rng'; the file is damaged");
  if (ids->dtype != DType::I32 || ids->shape.size() != 1 || weights->dtype != DType::F32 ||
      weights->shape != ids->shape || ids->shape[0] > vocab)
    throw StateFileError(path,
                         "the sampler history should be I32 [K] ids and F32 [K] weights "
                         "with K <= " +
                             std::to_string(vocab) + ", found " +
                             std::string(dtype_name(ids->dtype)) + " " + ids->shape_string() +
                             " and " + std::string(dtype_name(weights->dtype)) + " " +
                             weights->shape_string());
  SamplerSnapshot snap;
  try {
    snap.mode = parse_sampler_mode(meta.at("sampler_mode"));
  } catch (const InputError& e) {
    throw StateFileError(path, std::string("metadata 'sampler_mode': ") + e.what());
  }
  const std::string& rng = meta.at("sampler_rng");
  if (rng.size() != 16 || rng.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw StateFileError(
        path, "metadata 'sampler_rng' should be 16 lowercase hex digits, found '" + rng + "'");
  snap.rng_state = std::stoull(rng, nullptr, 16);
  const int64_t K = ids->shape[0];
  int32_t previous = -1;
  for (int64_t k = 0; k < K; ++k) {
    int32_t id;
    float w;
    std::memcpy(&id, ids->data + 4 * k, 4);
    std::memcpy(&w, weights->data + 4 * k, 4);
    if (id <= previous || id >= vocab || !std::isfinite(w) || w < 0)
      throw StateFileError(path, "sampler history entry " + std::to_string(k) + " (id " +
                                     std::to_string(id) + ", weight " + std::to_string(w) +
                                     ") is not an ascending id in [0, " + std::to_string(vocab) +
                                     ") with a finite weight >= 0; the file is damaged");
    previous = id;
    snap.history.emplace_back(id, w);
  }
  c.sampler = std::move(snap);
  return c;
}

// Reads the state file held by `file` (`path` names it in messages).
LoadedState read_state(std::shared_ptr<io::MappedFile> file, const std::string& path,
                       const Model& model, bool allow_other_base) {
  io::TensorSet set = io::read_safetensors(std::move(file));
  const auto& meta = set.metadata();
  if (!meta.count(kFormatKey))
    throw StateFileError(path,
                         "not a wick state file: the metadata has no 'wick.state' key (is "
                         "this a model checkpoint? pass it as --model instead)");
  const std::string& version = meta.at(kFormatKey);
  if (version != kFormatVersion && version != kFormatVersion1)
    throw StateFileError(path, "state file format version '" + version +
                                   "' is not supported (this wick reads versions 1 and 2); save it "
                                   "again with this version of wick");
  const std::string& kind = required(meta, "kind", path);
  if (kind != kKindSnapshot)
    throw StateFileError(path,
                         "state file kind '" + kind + "' is not a snapshot" +
                             (kind == "docindex" ? " (it is a reranker document index)" : "") +
                             "; expected kind 'snapshot'");

  const Geometry& g = model.geometry();
  const int L = parse_dim(meta, "n_layer", path), C = parse_dim(meta, "n_embd", path),
            H = parse_dim(meta, "n_head", path), N = parse_dim(meta, "head_size", path);
  const int64_t A = parse_count(meta, "n_attn", path, 0);
  const StateGeometry saved{L, C, H, N, static_cast<int>(std::min<int64_t>(A, INT32_MAX))};
  if (A > INT32_MAX || !state_fits(saved, g))
    throw StateFileError(path, state_mismatch_message(saved, g, "the saved state"));
  const int64_t T = A > 0 ? parse_count(meta, "kv_length", path, -1) : 0;
  if (T < 0) throw StateFileError(path, "metadata key 'kv_length' is missing; the file is damaged");

  LoadedState out;
  auto fp = meta.find("base_fingerprint");
  out.info.base_fingerprint = fp == meta.end() ? "" : fp->second;
  if (out.info.base_fingerprint != model.info().fingerprint) {
    const std::string what =
        fp == meta.end() ? std::string("has no base_fingerprint")
                         : "was saved by other weights (fingerprint " + out.info.base_fingerprint +
                               ", this model has " + model.info().fingerprint + ")";
    if (!allow_other_base)
      throw StateFileError(path, "the state " + what +
                                     "; continuing it would mix two models. Pass allow_other_base "
                                     "(CLI: --allow-other-base) if this is intended");
    out.warnings.push_back("state file " + path + " " + what + "; loaded anyway as requested");
  }

  // Exactly these tensors, F32, with the geometry's shapes.
  std::map<std::string, std::vector<int64_t>> expected = {
      {"wkv", {L, 1, H, N, N}}, {"tmix_shift", {L, 1, 1, C}}, {"cmix_shift", {L, 1, 1, C}}};
  if (A > 0) {
    expected["attn_cmix_shift"] = {A, 1, 1, C};
    expected["attn_k_cache"] = {A, T, C};
    expected["attn_v_cache"] = {A, T, C};
  }
  const bool v2 = version == kFormatVersion;
  auto optional_v2 = [&](const std::string& name) {
    return v2 &&
           (name == "logits" || name == "sampler_history_ids" || name == "sampler_history_weights");
  };
  for (const io::TensorView& t : set.tensors())
    if (!expected.count(t.name) && !optional_v2(t.name))
      throw StateFileError(path,
                           "unexpected tensor '" + t.name +
                               "'; a snapshot holds only wkv, tmix_shift and cmix_shift" +
                               (A > 0 ? ", attn_cmix_shift, attn_k_cache and attn_v_cache" : "") +
                               (v2 ? std::string(" (and optionally logits and the sampler "
                                                 "history)")
                                   : std::string(" (format 1)")));
  for (const auto& [name, shape] : expected) {
    const io::TensorView* t = set.find(name);
    if (!t) throw StateFileError(path, "tensor '" + name + "' is missing");
    if (t->dtype != DType::F32 || t->shape != shape) {
      std::string want;
      for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
      throw StateFileError(path, "tensor '" + name + "' should be F32 [" + want + "], found " +
                                     std::string(dtype_name(t->dtype)) + " " + t->shape_string());
    }
  }

  // NaN or inf in a state makes every later logit NaN (it used to surface as a sampler error).
  for (const auto& [name, shape] : expected) {
    bool nan = false;
    const int64_t i = io::first_nonfinite(*set.find(name), &nan);
    if (i >= 0)
      throw StateFileError(path, "tensor '" + name + "' holds " + (nan ? "NaN" : "an infinity") +
                                     " at element " + std::to_string(i) +
                                     "; expected finite values: the state file is damaged (or was "
                                     "saved from a model that had already produced NaN); save it "
                                     "again from a good run");
  }

  State st = model.new_state();
  const uint8_t* wkv = set.find("wkv")->data;
  const uint8_t* tmix = set.find("tmix_shift")->data;
  const uint8_t* cmix = set.find("cmix_shift")->data;
  const size_t wkv_bytes = st.wkv_size() * sizeof(float), shift_bytes = C * sizeof(float);
  for (int l = 0; l < L; ++l) {
    std::memcpy(st.wkv(l), wkv + l * wkv_bytes, wkv_bytes);
    std::memcpy(st.att_shift(l), tmix + l * shift_bytes, shift_bytes);
    std::memcpy(st.ffn_shift(l), cmix + l * shift_bytes, shift_bytes);
  }
  if (A > 0) {
    const uint8_t* attn_cmix = set.find("attn_cmix_shift")->data;
    const uint8_t* k = set.find("attn_k_cache")->data;
    const uint8_t* v = set.find("attn_v_cache")->data;
    st.resize_kv(T);
    const size_t rows_bytes = static_cast<size_t>(T) * C * sizeof(float);
    for (int j = 0; j < A; ++j) {
      std::memcpy(st.attn_ffn_shift(j), attn_cmix + j * shift_bytes, shift_bytes);
      if (rows_bytes) {
        std::memcpy(st.k_cache(j), k + j * rows_bytes, rows_bytes);
        std::memcpy(st.v_cache(j), v + j * rows_bytes, rows_bytes);
      }
    }
  }
  out.state = std::move(st);
  if (v2) out.info.continuation = read_continuation(set, path, g.vocab);

  if (auto it = meta.find("note"); it != meta.end()) out.info.note = it->second;
  if (auto it = meta.find("engine_version"); it != meta.end()) out.info.engine_version = it->second;
  if (auto it = meta.find("contract"); it != meta.end()) {
    io::JsonLimits limits;
    limits.max_depth = 3;
    const nlohmann::json c = io::parse_json_limited(it->second, path, "state contract", limits);
    if (!c.is_object()) throw StateFileError(path, "metadata 'contract' should be a JSON object");
    if (c.contains("tokenizer") && c["tokenizer"].is_string()) out.info.tokenizer = c["tokenizer"];
    if (c.contains("n_tokens") && c["n_tokens"].is_number_integer())
      out.info.n_tokens = c["n_tokens"];
    if (c.contains("prompt_sha256") && c["prompt_sha256"].is_string())
      out.info.prompt_sha256 = c["prompt_sha256"];
  }
  return out;
}

}  // namespace

void save_state(const std::string& path, const State& state, const Model& model,
                const StateFileInfo& info) {
  StateFileParts parts;
  build_state_file(parts, state, model, info);
  io::write_safetensors(path, parts.tensors, parts.meta);
}

std::string serialize_state(const State& state, const Model& model, const StateFileInfo& info) {
  StateFileParts parts;
  build_state_file(parts, state, model, info);
  return io::serialize_safetensors(parts.tensors, parts.meta);
}

LoadedState load_state(const std::string& path, const Model& model, bool allow_other_base) {
  return read_state(io::MappedFile::open(path), path, model, allow_other_base);
}

LoadedState parse_state(std::string_view bytes, const std::string& name, const Model& model,
                        bool allow_other_base) {
  return read_state(
      io::MappedFile::borrow(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name),
      name, model, allow_other_base);
}

}  // namespace wick
