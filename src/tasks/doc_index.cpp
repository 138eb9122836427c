// Folded document states: the in-memory LRU cache and the on-disk document index of
// include/wick/rerank.h. Each document state is a wick state file (docs/tasks.md §3.5), so the
// model fingerprint, geometry and exact bytes are checked by the one state-file reader.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/sha256.h"
#include "io/atomic_file.h"
#include "wick/errors.h"
#include "wick/rerank.h"
#include "wick/state_file.h"

namespace wick {
namespace {

namespace fs = std::filesystem;
constexpr const char* kIndexFormat = "wick-rerank-index-v1";

const char* format_name(RerankFormat f) {
  return f == RerankFormat::kEmbeddingRWKV ? "embedding-rwkv" : "rwkv-metal-head-v1";
}

nlohmann::json contract_json(const Reranker& r) {
  const RerankContract& c = r.contract();
  nlohmann::json j;
  j["template"] = c.doc_first ? "doc_first" : "query_first";
  j["instruct"] = c.instruct;
  j["max_doc_tokens"] = c.max_doc_tokens;
  // States folded with bf16 matmul inputs are other numbers: such an index is only reused at
  // that precision (absent = fp32, as indexes written before the option).
  if (r.model().precision() != Precision::kFp32)
    j["precision"] = std::string(precision_name(r.model().precision()));
  return j;
}

// Identifies a folded prefix: the model's weights, the head format and contract, the prefix ids.
std::string state_key(const Reranker& r, const std::vector<int32_t>& prefix) {
  base::Sha256 h;
  h.update(r.model().info().fingerprint).update(std::string_view("\0", 1));
  h.update(format_name(r.format())).update(std::string_view("\0", 1));
  h.update(contract_json(r).dump()).update(std::string_view("\0", 1));
  h.update(prefix.data(), prefix.size() * sizeof(int32_t));
  return h.hex_digest();
}

std::string state_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / "states" / (key + ".safetensors")).string();
}

void write_index_json(const std::string& dir, const Reranker& r,
                      const std::vector<std::string>& docs, const std::vector<std::string>& keys) {
  nlohmann::json j;
  j["format"] = kIndexFormat;
  j["model"] = r.model().info().fingerprint;
  j["head_format"] = format_name(r.format());
  j["contract"] = contract_json(r);
  j["docs"] = nlohmann::json::array();
  for (size_t i = 0; i < docs.size(); ++i)
    j["docs"].push_back({{"text", docs[i]}, {"key", keys[i]}});
  const std::string text = j.dump(1) + "\n";
  io::AtomicFile f((fs::path(dir) / "index.json").string());
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace

std::shared_ptr<const State> DocStateCache::get(const std::string& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second;
}

void DocStateCache::put(const std::string& key, State state) {
  if (auto it = map_.find(key); it != map_.end()) {
    bytes_ -= it->second->second->bytes();
    order_.erase(it->second);
    map_.erase(it);
  }
  const uint64_t b = state.bytes();
  if (b > max_bytes_) return;
  while (bytes_ + b > max_bytes_ && !order_.empty()) {
    bytes_ -= order_.back().second->bytes();
    map_.erase(order_.back().first);
    order_.pop_back();
  }
  order_.emplace_front(key, std::make_shared<const State>(std::move(state)));
  map_[key] = order_.begin();
  bytes_ += b;
}

DocumentIndex DocumentIndex::build(const Reranker& reranker, std::vector<std::string> docs,
                                   const std::string& dir, DocStateCache* cache,
                                   const ProgressFn& progress) {
  if (docs.empty()) {
    throw InputError(
        "no documents to index: give at least one document (an empty index would "
        "score nothing)");
  }
  DocumentIndex index;
  const size_t n = docs.size();
  std::vector<std::string> keys(n);
  index.states_.resize(n);
  std::vector<size_t> to_fold;
  for (size_t i = 0; i < n; ++i) {
    keys[i] = state_key(reranker, reranker.prefix_tokens(docs[i]));
    if (cache) index.states_[i] = cache->get(keys[i]);
    if (!index.states_[i] && !dir.empty() && fs::exists(state_path(dir, keys[i]))) {
      LoadedState ls = load_state(state_path(dir, keys[i]), reranker.model());
      index.states_[i] = std::make_shared<const State>(std::move(ls.state));
      if (cache) cache->put(keys[i], *index.states_[i]);
    }
    if (!index.states_[i]) to_fold.push_back(i);
  }
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(dir) / "states", ec);
    if (ec) throw FileError(dir, "cannot create the index folder: " + ec.message());
  }
  std::vector<std::string> pending;
  for (size_t i : to_fold) pending.push_back(docs[i]);
  std::vector<State> folded = reranker.fold_documents(pending, 8, progress);
  for (size_t k = 0; k < to_fold.size(); ++k) {
    const size_t i = to_fold[k];
    if (cache) cache->put(keys[i], folded[k]);
    index.states_[i] = std::make_shared<const State>(std::move(folded[k]));
  }
  // Every listed key gets its state file (also states that came from the cache).
  if (!dir.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (fs::exists(state_path(dir, keys[i]))) continue;
      StateFileInfo info;
      info.note = "wick rerank document prefix";
      info.tokenizer = std::string(reranker.tokenizer().name());
      info.n_tokens = static_cast<int64_t>(reranker.prefix_tokens(docs[i]).size());
      info.prompt_sha256 = base::sha256_hex(docs[i]);
      save_state(state_path(dir, keys[i]), *index.states_[i], reranker.model(), info);
    }
  }
  index.folded_ = to_fold.size();
  if (!dir.empty()) write_index_json(dir, reranker, docs, keys);
  index.docs_ = std::move(docs);
  return index;
}

DocumentIndex DocumentIndex::open(const Reranker& reranker, const std::string& dir) {
  const std::string path = (fs::path(dir) / "index.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the rerank index (build it with --docs first)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, "", "a JSON rerank index",
                      std::string("invalid JSON (") + e.what() + ")");
  }
  auto string_field = [&](const char* key) -> std::string {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string())
      throw FormatError(path, "", std::string("a string field '") + key + "'", "none");
    return j[key].get<std::string>();
  };
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>() != kIndexFormat || !j.contains("docs") ||
      !j["docs"].is_array()) {
    throw FormatError(path, "", std::string("a wick rerank index (format ") + kIndexFormat + ")",
                      "another JSON document");
  }
  const std::string model_fp = string_field("model");
  const std::string head_format = string_field("head_format");
  const nlohmann::json contract = j.value("contract", nlohmann::json());
  if (model_fp != reranker.model().info().fingerprint) {
    throw InputError(dir + ": the index was built with another model (fingerprint " + model_fp +
                     ", this model " + reranker.model().info().fingerprint +
                     "); rebuild it with this model");
  }
  if (head_format != format_name(reranker.format()) || contract != contract_json(reranker)) {
    throw InputError(dir + ": the index was built for another reranker contract (" + head_format +
                     " " + contract.dump() + ", this head " + format_name(reranker.format()) + " " +
                     contract_json(reranker).dump() + "); rebuild it with this head");
  }
  DocumentIndex index;
  for (const auto& d : j["docs"]) {
    if (!d.is_object() || !d.contains("text") || !d["text"].is_string() || !d.contains("key") ||
        !d["key"].is_string()) {
      throw FormatError(path, "", "docs entries {\"text\": string, \"key\": string}", d.dump());
    }
    const std::string key = d["key"].get<std::string>();
    if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw FormatError(path, "", "a 64-hex-digit state key", "'" + key + "'");
    // The key must be the one of this text under this model and contract: an edited index.json
    // cannot pair a text with another document's state.
    const std::string text = d["text"].get<std::string>();
    if (state_key(reranker, reranker.prefix_tokens(text)) != key) {
      throw FormatError(path, "", "the key of each document's text",
                        "key " + key.substr(0, 12) + "... does not belong to document " +
                            std::to_string(index.docs_.size()) +
                            " (edited or damaged index.json); rebuild the index");
    }
    LoadedState ls = load_state(state_path(dir, key), reranker.model());
    index.docs_.push_back(text);
    index.states_.push_back(std::make_shared<const State>(std::move(ls.state)));
  }
  return index;
}

std::vector<float> DocumentIndex::score(const Reranker& reranker, std::string_view query,
                                        const ProgressFn& progress) const {
  std::vector<const State*> ptrs;
  ptrs.reserve(states_.size());
  for (const auto& s : states_) ptrs.push_back(s.get());
  return reranker.score_states(query, ptrs, 16, progress);
}

}  // namespace wick
