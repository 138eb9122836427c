// The weights of an x070 model after loading, in the form the passes use: small per-channel
// vectors and norms as fp32 copies; every matrix behind a Linear (model/linear.h).
#pragma once

#include <memory>
#include <vector>

#include "model/embedding.h"
#include "model/linear.h"
#include "wick/dtype.h"

namespace wick::model {

struct LayerWeights {
  // LayerNorms before time mixing (ln1) and channel mixing (ln2); bias empty = zero.
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
  // Time mixing: token-shift mixes, biases of the LoRA branches, key scales, bonus, GroupNorm.
  std::vector<float> x_r, x_w, x_k, x_v, x_a, x_g;
  std::vector<float> w0, a0, v0;  // v0 empty in layer 0
  std::vector<float> k_k, k_a, r_k;
  std::vector<float> ln_x_w, ln_x_b;
  std::unique_ptr<Linear> receptance, key, value, output;  // [C, C]
  // LoRA factors as Linear: down [D, C] (= w1^T), up [C, D] (= w2^T). v1/v2 null in layer 0.
  std::unique_ptr<Linear> w1, w2, a1, a2, v1, v2, g1, g2;
  // Channel mixing.
  std::vector<float> ffn_x_k;
  std::unique_ptr<Linear> ffn_key;    // [F, C]
  std::unique_ptr<Linear> ffn_value;  // [C, F]
};

// An RWKV-X attention block (docs/rwkvx.md §4.2): pre-LayerNorm multi-head softmax attention
// (C/64 heads of 64, no positional encoding, no biases), then pre-LayerNorm x070 channel mixing
// with its own token shift.
struct AttentionBlockWeights {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;      // LayerNorm eps 1e-5
  std::unique_ptr<Linear> query, key, value, output;  // [C, C]; query = att.receptance
  std::vector<float> ffn_x_k;
  std::unique_ptr<Linear> ffn_key;    // [F_a, C]
  std::unique_ptr<Linear> ffn_value;  // [C, F_a]
};

// One entry of the execution order: RWKV layer `index` or attention block `index`.
struct BlockRef {
  bool attention = false;
  int index = 0;
};

struct ModelWeights {
  // Embedding table [V, C], read one row per token in its stored form (model/embedding.h).
  std::unique_ptr<Embedding> emb;
  std::vector<float> ln0_w, ln0_b;  // empty when the checkpoint has no ln0
  std::vector<LayerWeights> layers;
  std::vector<float> ln_out_w, ln_out_b;
  std::unique_ptr<Linear> head;  // [V, C]
  // RWKV-X only (empty otherwise).
  std::vector<AttentionBlockWeights> attention;
  // Execution order of all blocks: RWKV layers 0..L-1 in order, each attention block after its
  // group (docs/rwkvx.md §2). Filled for every model.
  std::vector<BlockRef> order;
};

}  // namespace wick::model
