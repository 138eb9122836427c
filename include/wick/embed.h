// Text embeddings from an RWKV-7 base (docs/tasks.md §6): one parallel pass per text from the zero
// state (never padded, so a text's vector never depends on the texts beside it), hidden states
// after ln_out, pooling, an optional residual head, L2 normalisation:
//   h = relu(x · fc1ᵀ) · fc2ᵀ;  y = LayerNorm(h + x; eps 1e-5);  e = y / sqrt(Σy² + 1e-12)
// Three sources of heads, one arithmetic:
//   * none                 e = L2(pooled)                                      (§6.1 "no head")
//   * a head file          SwiftRWKV safetensors (head.fc1, head.fc2, head.norm.*, metadata
//                          format = swiftrwkv-embedding-head-v1) or rwkv-metal's names
//                          (head.fc1.weight, ...; no metadata: non-strict only)        (§6.2)
//   * EmbeddingRWKV        the task heads inside the checkpoint (head.{retr,sts,cls}_head.*), EOS
//                          65535 appended, "EOS mean" pooling, no truncation             (§6.3)
// Cosine similarity of two embeddings is their dot product.
//
// Thread-safety: an Embedder is immutable after construction; embed() may run concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/model.h"
#include "wick/progress.h"
#include "wick/tokenizer.h"

namespace wick {

enum class Pooling {
  kLast,     // hidden state at the last position (the terminator)
  kMean,     // mean over every position (terminator included)
  kEosMean,  // mean over the positions holding the EOS id (EmbeddingRWKV)
};

// How a text becomes tokens and one vector (defaults: the SwiftRWKV contract of §6.1).
struct EmbedContract {
  Pooling pooling = Pooling::kLast;
  std::optional<int32_t> terminator = 0;  // appended after the text; nullopt = none
  // Longest token sequence (terminator included); 0 = no limit. Over the limit: truncate keeps the
  // head of the text and then appends the terminator (§6.1); otherwise the text is refused.
  int max_tokens = 512;
  bool truncate = true;
};

enum class EmbedTask { kRetrieval, kSimilarity, kClassification };  // [RETR], [STS], [CLS]

class Embedder {
 public:
  // No head: e = L2(pooled) (a raw base is not a good retrieval embedder; see docs/tasks.md §6.1).
  // Throws InputError when the terminator is outside the model's vocabulary.
  static Embedder plain(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                        EmbedContract contract = {});
  // What a caller sets explicitly; everything else comes from the head file (or the defaults).
  struct Overrides {
    std::optional<Pooling> pooling;  // must agree with a head file that records one
    std::optional<int> max_tokens;   // replaces the file's limit (0 = none)
  };
  // A head file. SwiftRWKV layout with metadata: the contract comes from the metadata, then
  // `overrides.max_tokens`; an `overrides.pooling` that differs from the recorded one is refused.
  // A file without the format marker, or in rwkv-metal's layout (no metadata), loads only with
  // strict = false, and rwkv-metal's layout then needs `overrides.pooling` (the explicit
  // contract of docs/tasks.md §6.2). Throws FileError / FormatError, CheckpointError (missing or
  // misshapen tensors, dim different from the model width, the strict refusals above, metadata
  // that does not parse or is out of range), InputError (a terminator outside the vocabulary).
  static Embedder with_head(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                            const std::string& head_path, bool strict = true,
                            const Overrides& overrides = {});
  // An EmbeddingRWKV checkpoint (`model` loaded from `checkpoint_path`): the task head `task`
  // from the same file; tokens = World ids + 65535; EOS-mean pooling; no limit unless
  // `max_tokens` > 0, above which texts are refused (upstream never truncates). Throws
  // CheckpointError (not an EmbeddingRWKV file, head missing or misshapen, vocabulary without
  // row 65535).
  static Embedder embedding_rwkv(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                                 const std::string& checkpoint_path,
                                 EmbedTask task = EmbedTask::kRetrieval, int max_tokens = 0);

  const Model& model() const;
  const EmbedContract& contract() const;
  bool has_head() const;
  int dim() const;  // C

  // The token ids of one text under the contract. Throws InputError (invalid UTF-8; a text over
  // max_tokens when truncation is off, naming its length and the limit).
  std::vector<int32_t> tokens(std::string_view text) const;

  // Embeddings [N, C] row-major, L2-normalised, in input order. Texts are packed into one pass per
  // group of up to `batch` texts (rows of all texts go through each GEMM together; no padding), so
  // results equal embedding each text alone. Every text is tokenized and checked before any pass;
  // InputError names the text: invalid input for the tokenizer, over the limit without
  // truncation, no tokens at all (empty text and no terminator), an id outside the vocabulary, a
  // kEosMean text without EOS.
  // `progress` is told the texts finished after each batch.
  std::vector<float> embed(std::span<const std::string> texts, int batch = 8,
                           const ProgressFn& progress = {}) const;
  // The same from token ids (each non-empty).
  std::vector<float> embed_tokens(std::span<const std::vector<int32_t>> ids, int batch = 8,
                                  const ProgressFn& progress = {}) const;
  // Pooled hidden states [N, C] before the head (not normalised), for inspection and tests.
  std::vector<float> pooled(std::span<const std::vector<int32_t>> ids, int batch = 8,
                            const ProgressFn& progress = {}) const;
  // The head and normalisation on pooled rows [N, C] -> embeddings [N, C]. Throws InputError when
  // the size is not a multiple of C.
  std::vector<float> finish(std::span<const float> pooled_rows) const;

  struct Impl;

 private:
  explicit Embedder(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Writes embeddings [n, dim] (row-major fp32) as a safetensors file: tensor `embeddings` F32
// [n, dim], the given string metadata plus `format` = wick-embeddings-v1. Atomic (temporary file,
// then rename). Throws InputError when vectors.size() != n * dim, FileError when it cannot write.
void save_embeddings(const std::string& path, std::span<const float> vectors, int64_t n,
                     int64_t dim, std::map<std::string, std::string> metadata = {});

// Dot product of two rows of equal length (= cosine for L2-normalised embeddings).
float cosine_of_normalised(std::span<const float> a, std::span<const float> b);

}  // namespace wick
