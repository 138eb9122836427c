// Private definition of Model::Impl: the loaded weights plus what keeps their bytes alive.
#pragma once

#include <memory>
#include <vector>

#include "base/sha256.h"
#include "io/tensor_set.h"
#include "model/weights.h"
#include "quant/rwkvq.h"
#include "wick/model.h"

namespace wick {

struct Model::Impl {
  Geometry geometry;
  ModelInfo info;
  model::ModelWeights weights;
  // Attention settings a Model starts with (RWKV-X: B and K from the checkpoint's metadata).
  AttentionOptions default_attention;
  std::vector<io::TensorSet> sources;  // keeps the mapped files alive
};

namespace model {

// Runs `op` (io::MappedFile::release_pages or io::MappedFile::advise_sparse) on the file among
// `impl`'s sources that holds all of [data, data + bytes) (io::MappedFile::holds), and returns what
// that call returned: the bytes covered, 0 when no file holds the range (heap copies, the embedded
// default model) or the call covered none (borrowed bytes, less than a page, a refused madvise).
// Thread-safe as `op` is; not while `impl`'s sources change.
size_t on_mapped_pages(const Model::Impl& impl, const void* data, size_t bytes,
                       size_t (io::MappedFile::*op)(const void*, size_t) const);

// The dense embedding table's bytes ({nullptr, 0} for a packed table or none): a view, valid
// while w.emb lives.
ByteRange dense_embedding_bytes(const ModelWeights& w);
// Whether `data` is where a dense embedding table's bytes begin (a head tied to the table borrows
// the same bytes, so its matrix data compares equal).
bool is_embedding_table(const ModelWeights& w, const void* data);

// Advises the pages of the embedding table (dense, or a .rwkvq table's packed buffers; ranges less
// than a page apart advised as one) that lie in a mapped file for sparse reads
// (io::MappedFile::advise_sparse): a step reads one row of it, so its pages should come in one by
// one, not a huge page or a read-ahead window at a time. Not done while a dense head is tied to
// the table (every step then reads all of it). Returns the bytes advised (0: nothing to advise -
// a table in memory, none - or the kernel refused). Called by the loader on the built weights
// before they are shared, and again after --quantize int8 has turned a tied head into int8
// codes (quantize_model_int8). Idempotent.
size_t advise_sparse_embedding(const Model::Impl& impl);

struct BuildOptions {
  // A checkpoint without head.weight is refused (true) or loads as a backbone without LM head.
  bool require_head = true;
  // With a `packed` .rwkvq: the prefix its keys carry beyond the names in `tensors` (RWKV-X
  // builds its `rwkv.*` part from the tensors without the prefix).
  std::string packed_prefix;
};

// Builds the model from the tensors of one checkpoint (any naming convention). `hf_config` is the
// text of an fla/HF config.json, or empty. Throws CheckpointError.
// `packed`: the .rwkvq file when `tensors` is its logical view (see Model::load), else null.
std::shared_ptr<Model::Impl> build_model(io::TensorSet tensors, const std::string& hf_config,
                                         const std::string& config_path,
                                         const quant::RwkvqFile* packed = nullptr,
                                         const BuildOptions& options = {});

// A Model from tensors named in one of the conventions (reranker head stacks are built this way:
// their probe table is the "embedding", their blocks are x070 blocks). Throws CheckpointError.
Model model_from_tensors(io::TensorSet tensors, const BuildOptions& options);

// Adds one dense tensor to a weights fingerprint (docs/tasks.md §3.5): name, dtype tag, shape
// "d0,d1,...", each followed by 0x00, and the stored bytes of tensors of at most 65536 elements.
void hash_tensor_record(base::Sha256& h, const std::string& name, const io::TensorView& t);

// Throws CheckpointError (file `path`, tensor `what`, e.g. "'blocks.0.att.w0'") when one of the
// `n` elements at `data` (F32, F16 or BF16) is NaN or infinite. The loaders call it for the small
// tensors (vectors, norms, LoRA factors); the large projections are not scanned at load.
void check_finite_weights(const std::string& path, const std::string& what, const void* data,
                          DType dtype, int64_t n);

// RWKV-X (docs/rwkvx.md §3): a checkpoint with `moba.{j}.*` attention blocks beside `rwkv.*`.
bool is_rwkvx(const io::TensorSet& set);
// Builds the hybrid: the `rwkv.*` part through build_model (x070 blocks, unchanged), then the
// attention blocks and the block order. `packed`: the .rwkvq file when `set` is its logical view
// (both parts are then read through it), else null. Throws CheckpointError (unknown or missing
// tensors, inconsistent shapes, N_r not a multiple of N_a).
std::shared_ptr<Model::Impl> build_rwkvx(io::TensorSet set,
                                         const quant::RwkvqFile* packed = nullptr);

}  // namespace model
}  // namespace wick
