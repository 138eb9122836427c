// Reranking with a frozen RWKV-7 base and a small state-reading head (docs/tasks.md §5): the base
// folds the (instruction, document, query) text into its recurrent state; the head pushes probe
// vectors through a short stack of x070 blocks whose WKV recurrences start from the base's WKV
// matrices of chosen layers and maps the last probe's output to one score:
//   score = fc2 · tanh(fc1 · LayerNorm(x_last; ln_out) + b1)      (a raw logit, f32)
// Two head formats are read, each with its own text contract:
//   * kHeadV1        rwkv-metal / SwiftRWKV head safetensors (`format` =
//                    rwkv-metal-reranker-head-v1; §5.4), contract from its metadata (§5.5);
//   * kEmbeddingRWKV howard-hou/EmbeddingRWKV reranker `.pth` (`reranker.*`, §5.8), run on its
//                    paired EmbeddingRWKV embedding model; fixed contract, EOS 65535, sigmoid
//                    score offered.
// The head blocks are x070 blocks run by the same Model code as the base (the probe table is
// their "embedding"), so there is one copy of the block arithmetic.
//
// Two paths compute the same scores:
//   * direct:  each query–document pair in full (prefix ++ tail) from the zero state;
//   * indexed: the prefix (instruction + document) is folded once into a State (fold_documents),
//              every query continues from a copy of it (score_states); the cost per extra query
//              is its tail only. States can be cached (DocStateCache) and saved (DocumentIndex).
// Scores are comparable only within one query. Batches are packed without padding, so a pair's
// score never depends on its batch neighbours.
//
// Thread-safety: a Reranker is immutable after load; its const methods may run concurrently.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wick/model.h"
#include "wick/progress.h"
#include "wick/state.h"
#include "wick/tokenizer.h"

namespace wick {

enum class RerankFormat { kHeadV1, kEmbeddingRWKV };

// How a pair becomes tokens (docs/tasks.md §5.5; fixed values for kEmbeddingRWKV, §5.8).
struct RerankContract {
  bool doc_first = true;   // template: instruction + document first, query last (else query first)
  std::string instruct;    // the instruction the head was trained with
  int max_doc_tokens = 0;  // truncation of the document's tokens (head kept); 0 = none
  int max_query_tokens = 0;           // truncation of the query's tokens; 0 = none
  std::optional<int32_t> terminator;  // id appended after the tail (0, 65535 for EmbeddingRWKV)
};

// One scored document: its 0-based position in the input, the raw head logit, and the reported
// score (sigmoid of the logit for kEmbeddingRWKV, else the logit).
struct RerankResult {
  int64_t index = 0;
  float logit = 0;
  float score = 0;
};

class Reranker {
 public:
  // Loads the head at `head_path` (.safetensors for kHeadV1, .pth for kEmbeddingRWKV; the format
  // is detected from the tensor names) for the base `model`. `strict` (default): a kHeadV1 file
  // without the format marker, or whose recorded base geometry (base_n_layer/embd/head) differs
  // from `model`, is refused, and an EmbeddingRWKV head needs an EmbeddingRWKV base; with
  // strict = false these checks are skipped (the metadata present is still used, absent keys
  // take the §5.5 defaults). Throws FileError / FormatError (unreadable file), CheckpointError
  // (missing or misshapen tensors; a head whose width, heads or head size differs from `model`;
  // the strict checks above; layer indices empty, out of range or not one per head block;
  // metadata that does not parse; an EmbeddingRWKV head on a base without the EOS row 65535).
  static Reranker load(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                       const std::string& head_path, bool strict = true);

  RerankFormat format() const;
  const RerankContract& contract() const;
  const Model& model() const;
  const Tokenizer& tokenizer() const;
  // Base layer read by each head block (normalised to 0..L-1).
  const std::vector<int>& source_layers() const;
  int n_probe() const;
  // True for kEmbeddingRWKV, whose upstream reports sigmoid(logit) as the relevance.
  bool has_sigmoid() const;

  // Token ids of the document prefix (folded once on the indexed path) and of the query tail.
  // For a query-first contract the document is part of the tail and the prefix is the instruction
  // only. Throws InputError for text that is not valid UTF-8.
  std::vector<int32_t> prefix_tokens(std::string_view doc) const;
  std::vector<int32_t> tail_tokens(std::string_view query, std::string_view doc = {}) const;

  // Direct path: head logits in input order (empty docs -> empty). Pairs are run `batch` at a
  // time (packed rows, no padding). Every id is checked against the base vocabulary before any
  // pass; InputError names the document.
  std::vector<float> score(std::string_view query, std::span<const std::string> docs, int batch = 8,
                           const ProgressFn& progress = {}) const;

  // Indexed path, step 1: the base state after each document's prefix (full state: every
  // layer's WKV and both token shifts). Throws InputError for a query-first contract (the prefix
  // would depend on the query), bad UTF-8, or ids outside the vocabulary.
  std::vector<State> fold_documents(std::span<const std::string> docs, int batch = 8,
                                    const ProgressFn& progress = {}) const;
  // Indexed path, step 2: head logits for `query` continued from copies of the document states
  // (the states are not modified). Throws InputError for a query-first contract or a state of
  // another geometry.
  std::vector<float> score_states(std::string_view query, std::span<const State* const> doc_states,
                                  int batch = 16, const ProgressFn& progress = {}) const;

  // The head alone on base states taken after the last token of each pair (only their WKV parts
  // are read). Throws InputError for a state of another geometry.
  std::vector<float> head_logits(std::span<const State* const> pair_states) const;

  // The reported score of a logit (sigmoid for kEmbeddingRWKV, identity otherwise).
  float score_of(float logit) const;
  // Results sorted by descending logit, ties by ascending index (deterministic); NaN last.
  std::vector<RerankResult> rank(std::span<const float> logits) const;

  struct Impl;

 private:
  explicit Reranker(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Folded document states kept in memory up to a byte budget, least recently used evicted first.
// A state costs State::bytes() (L·(H·N·N + 2C)·4 bytes: 2.4 MB at 0.1B). Keys are strings chosen
// by the caller (DocumentIndex uses the SHA-256 of the model, contract and prefix ids).
// Thread-safety: not synchronised; guard it when sharing between threads.
class DocStateCache {
 public:
  explicit DocStateCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  // The state for `key` (marked most recently used), or null.
  std::shared_ptr<const State> get(const std::string& key);
  // Inserts or replaces; evicts least recently used entries until the total fits. A state larger
  // than the whole budget is not kept.
  void put(const std::string& key, State state);
  uint64_t bytes() const { return bytes_; }
  uint64_t max_bytes() const { return max_bytes_; }
  size_t size() const { return map_.size(); }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const State>>;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  std::list<Entry> order_;  // front = most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> map_;
};

// Documents folded once and scored against any number of queries, optionally stored in a folder
// so a corpus indexed once can be reranked later without folding its documents again:
//   DIR/index.json               {"format": "wick-rerank-index-v1", "model": fingerprint,
//                                 "head_format", "contract": {...}, "docs": [{"text", "key"}]}
//                                (contract "precision": "bf16" when folded with bf16 matmul
//                                inputs: such an index is refused at another precision)
//   DIR/states/<key>.safetensors one wick state file per document (docs/tasks.md §3.5), where
//                                key = SHA-256 of (model fingerprint, contract, prefix ids).
// Thread-safety: const methods may run concurrently.
class DocumentIndex {
 public:
  // Folds `docs` (states found in `cache` or in `dir` are reused; every state is written to `dir`
  // when it is not empty and put into `cache` when given); then writes DIR/index.json, which
  // lists exactly `docs` (a previous list is replaced; state files of documents no longer listed
  // stay in DIR/states). Throws InputError for an empty `docs` and like
  // Reranker::fold_documents, FileError when the folder cannot be written, StateFileError when a
  // stored state belongs to another model.
  // `progress` is told the documents folded so far (of those not found).
  static DocumentIndex build(const Reranker& reranker, std::vector<std::string> docs,
                             const std::string& dir = "", DocStateCache* cache = nullptr,
                             const ProgressFn& progress = {});
  // Opens the index in `dir` (documents from its index.json). Throws FileError (missing files),
  // FormatError (index.json does not parse, is not a wick index, has fields of the wrong type, or
  // a key that does not belong to its document's text), InputError (built for another model, head
  // format or contract: the message says which, and to rebuild), StateFileError.
  static DocumentIndex open(const Reranker& reranker, const std::string& dir);

  size_t size() const { return docs_.size(); }
  const std::vector<std::string>& documents() const { return docs_; }
  const State& state(size_t i) const { return *states_.at(i); }  // std::out_of_range past size()
  // Head logits of `query` against every document, in document order.
  std::vector<float> score(const Reranker& reranker, std::string_view query,
                           const ProgressFn& progress = {}) const;
  // How many states were folded by build() (the rest came from the cache or the folder).
  size_t folded() const { return folded_; }

 private:
  std::vector<std::string> docs_;
  std::vector<std::shared_ptr<const State>> states_;
  size_t folded_ = 0;
};

}  // namespace wick
