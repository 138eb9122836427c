// The tensor table: every tensor of an x070 checkpoint and of an RWKV-X attention block, once, as
// data (docs/naming.md §2 for the official names, docs/x070-math.md §1 for the shapes,
// docs/rwkvx.md §3 for the attention blocks).
//
// One row per tensor: its official name inside its block, its shape in the spec's letters, its
// role, whether it may be absent, whether `--quantize int8` converts it, the activation trace of
// its input (for the activation statistics), and where it lives in the loaded weights
// (model/weights.h). Everything that needs "the list of tensors" walks these rows: the loaders
// (model/loader.cpp, model/load_rwkvx.cpp), the INT8 conversion (model/int8_linear.cpp), the
// bytes one decode step reads (ModelInfo::bytes_per_token), the activation-statistics keys
// (tasks/act_stats.cpp) and the synthetic generator (synth/synth.cpp).
//
// The role decides the precision a tensor is kept in after loading (the lowest it may have):
//   kNorm, kVector, kHeadMatrix  -> fp32 copies, checked finite;
//   kLoraDown, kLoraUp           -> 16-bit as stored, else fp32 (packed records dequantised once);
//   kProjection                  -> as stored: dense borrowed from the file, packed .rwkvq kept
//                                   packed, or converted to INT8 at load where `int8` is set.
//   kEmbedding                   -> as stored, read one row per token.
//
// The rwkv-quant group of a key (tasks/quantize_file.cpp) is not a column here: rwkv-quant
// assigns groups by substrings of the stored key in any naming (fla LoRA factors and embeddings
// stay dense there), and wick's quantiser reproduces that rule exactly.
//
// Thread-safety: constant data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/weights.h"
#include "wick/model.h"

namespace wick::model {

// A dimension in the spec's letters (docs/x070-math.md §1, docs/rwkvx.md §3).
enum class Dim : uint8_t {
  kOne,
  kC,   // width
  kF,   // channel-mix width of the RWKV blocks
  kFa,  // channel-mix width of the attention blocks
  kH,   // heads
  kN,   // head size
  kV,   // vocabulary
  kDw,  // decay LoRA rank
  kDa,  // in-context-rate LoRA rank
  kDv,  // value-residual LoRA rank
  kDg,  // gate LoRA rank
};

enum class Role : uint8_t {
  kNorm,        // LayerNorm / GroupNorm weight or bias: [rows], stored [C]
  kVector,      // per-channel parameter: [rows], stored [1, 1, C]
  kHeadMatrix,  // a small [H, N] matrix of values (att.r_k)
  kLoraDown,    // LoRA factor applied first: Linear [rows = D, cols = C]; stored [C, D]
  kLoraUp,      // LoRA factor applied second: Linear [rows = C, cols = D]; stored [D, C]
  kProjection,  // a weight matrix [rows = out, cols = in], stored so
  kEmbedding,   // the embedding table [V, C]
};

enum class Presence : uint8_t {
  kAlways,
  kNormBias,       // absent when the norms have no bias (fla norm_bias = false): then zero
  kAfterLayer0,    // value residual: not used in layer 0 (present there in some exports: ignored)
  kNormFirst,      // ln0 weight: present unless fla norm_first = false
  kNormFirstBias,  // ln0 bias: as kNormFirst, and absent with the other biases (kNormBias)
  kHead,           // the LM head: absent in embedding backbones, or tied to the embedding
};

// One tensor. `W` is the weights struct its value is stored in; exactly one of vec / lin / emb
// is set.
template <class W>
struct TensorSpec {
  std::string_view name;  // official name inside the block ("att.key.weight"); top level: full
  Role role;
  Dim rows, cols;  // the shape as the passes use it (see Role); cols = kOne for vectors
  Presence presence;
  bool int8;               // converted by --quantize int8 (LoadOptions::quantize)
  std::string_view trace;  // trace name of this projection's input (wick/model.h), or ""
  std::string_view about;  // what it is, for messages ("decay LoRA down"), or ""
  std::vector<float> W::*vec = nullptr;
  std::unique_ptr<Linear> W::*lin = nullptr;
  std::unique_ptr<Embedding> W::*emb = nullptr;
};

using LayerSpec = TensorSpec<LayerWeights>;
using AttentionSpec = TensorSpec<AttentionBlockWeights>;
using ModelSpec = TensorSpec<ModelWeights>;

// An x070 block: official names after "blocks.{i}.", in the order of the official state dict.
std::span<const LayerSpec> layer_tensors();
// An RWKV-X attention block: names after "moba.{j}.".
std::span<const AttentionSpec> attention_tensors();
// Outside the blocks: the embedding, ln0 (stored as "blocks.0.ln0.*"), ln_out and the head, in
// the order of the official state dict (the ln0 rows come before the blocks, the rest after).
std::span<const ModelSpec> model_tensors();
// True for the model-level rows stored before the blocks (emb, ln0).
bool before_blocks(const ModelSpec& s);

// The trace name of the input of the projection stored in `member` (the row's `trace`): the
// passes trace that input under this name (model/forward.cpp), the activation statistics key it
// by the same row. Throws InternalError for a member no row with a trace names.
std::string_view input_trace(std::unique_ptr<Linear> LayerWeights::*member);
std::string_view input_trace(std::unique_ptr<Linear> ModelWeights::*member);

// The value of a dimension for a geometry (kOne = 1).
int64_t dim_value(Dim d, const Geometry& g);
// "C", "F", "F_a", "H", "N", "V", "D_w", ... for messages.
std::string_view dim_letter(Dim d);
// "C x C", "F x C", ... (rows x cols).
template <class W>
std::string shape_letters(const TensorSpec<W>& s) {
  return std::string(dim_letter(s.rows)) + " x " + std::string(dim_letter(s.cols));
}
// The shape in an official checkpoint: norms [C]; vectors [1, 1, C]; r_k [H, N]; LoRA factors
// transposed ([C, D] down, [D, C] up); projections and the embedding as [rows, cols].
template <class W>
std::vector<int64_t> official_shape(const TensorSpec<W>& s, const Geometry& g) {
  const int64_t r = dim_value(s.rows, g), c = dim_value(s.cols, g);
  switch (s.role) {
    case Role::kNorm:
      return {r};
    case Role::kVector:
      return {1, 1, r};
    case Role::kLoraDown:
    case Role::kLoraUp:
      return {c, r};
    default:
      return {r, c};
  }
}

// The stored bytes of the Linears of `w` that the rows of `table` name (set ones only): what one
// decode step reads of them.
template <class W>
uint64_t linear_bytes(std::span<const TensorSpec<W>> table, const W& w) {
  uint64_t b = 0;
  for (const TensorSpec<W>& s : table)
    if (s.lin != nullptr && w.*s.lin) b += (w.*s.lin)->stored_bytes();
  return b;
}

}  // namespace wick::model
