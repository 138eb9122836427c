// Reads the rows of the tensor table (model/tensor_table.h) through the one TensorReader into the
// weights: the x070 loader for the model-level tensors and each block, the RWKV-X loader for each
// attention block. Errors are the TensorReader's CheckpointErrors (missing tensor, wrong dtype or
// shape, non-finite small tensor).
#pragma once

#include <span>
#include <string>

#include "model/tensor_reader.h"
#include "model/tensor_table.h"

namespace wick::model {

// What the checkpoint's config says about optional tensors (fla config.json norm_bias /
// norm_first; official checkpoints have both).
struct NormFlags {
  bool norm_bias = true;   // LayerNorms have biases (kNormBias rows are required)
  bool norm_first = true;  // layer 0 has ln0 (kNormFirst rows are read)
};

// Reads one row as `name` (the row's name with its block prefix) into `w`.
template <class W>
void read_tensor(TensorReader& r, const TensorSpec<W>& s, const std::string& name,
                 const Geometry& g, W& w) {
  const int64_t rows = dim_value(s.rows, g), cols = dim_value(s.cols, g);
  switch (s.role) {
    case Role::kNorm:
    case Role::kVector:
      w.*s.vec = r.vector(name, rows);
      return;
    case Role::kHeadMatrix: {
      const model::MappedTensor& t = r.matrix(name, rows, cols, shape_letters(s).c_str());
      w.*s.vec = r.finite_values(t, name);
      return;
    }
    case Role::kLoraDown:
    case Role::kLoraUp:
      w.*s.lin = r.lora(name, rows, cols, std::string(s.about).c_str());
      return;
    case Role::kProjection: {
      std::string what = shape_letters(s);
      if (!s.about.empty()) what += ", " + std::string(s.about);
      w.*s.lin = r.linear(name, rows, cols, what.c_str());
      return;
    }
    case Role::kEmbedding: {
      const model::MappedTensor& t = r.matrix(name, rows, cols, shape_letters(s).c_str());
      w.*s.emb = r.embedding(t, rows, cols);
      return;
    }
  }
}

// Reads every row of `table` that the checkpoint must or does hold, each as `prefix` + its name.
// `layer` is the x070 block index (kAfterLayer0 rows are ignored in block 0) or -1. kHead rows
// are left to the caller (tied, absent or own head).
template <class W>
void read_block(TensorReader& r, std::span<const TensorSpec<W>> table, const std::string& prefix,
                const Geometry& g, const NormFlags& f, int layer, W& w) {
  for (const TensorSpec<W>& s : table) {
    const std::string name = prefix + std::string(s.name);
    switch (s.presence) {
      case Presence::kAlways:
        break;
      case Presence::kNormBias:
        if (!f.norm_bias && !r.has(name)) continue;
        break;
      case Presence::kAfterLayer0:
        if (layer == 0) {
          r.ignore(name);  // present in some exports, never used
          continue;
        }
        break;
      case Presence::kNormFirst:
        if (!f.norm_first) continue;
        break;
      case Presence::kNormFirstBias:
        if (!f.norm_first || (!f.norm_bias && !r.has(name))) continue;
        break;
      case Presence::kHead:
        continue;
    }
    read_tensor(r, s, name, g, w);
  }
}

}  // namespace wick::model
