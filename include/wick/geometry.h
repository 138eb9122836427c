// What a checkpoint is, before any weight is read: the dimensions its tensor shapes give
// (Geometry) and the naming convention its tensors follow (NamingConvention). The loaders derive
// both from the tensor table (src/model/geometry.cpp, src/model/naming.cpp); a Model reports them
// (Model::geometry(), ModelInfo::naming); state files, state-geometry checks and the roofline
// figures of `wick bench` read them.
//
// Thread-safety: plain values.
#pragma once

#include <string_view>

namespace wick {

// Dimensions read from the weight shapes (docs/x070-math.md §1).
struct Geometry {
  int n_layer = 0;                                     // L: blocks
  int n_embd = 0;                                      // C: model width
  int n_head = 0;                                      // H: heads (from att.r_k [H, N])
  int head_size = 0;                                   // N: head size, H*N == C
  int ffn_dim = 0;                                     // F: channel-mix width (ffn.key [F, C])
  int vocab = 0;                                       // V: vocabulary (emb [V, C])
  int lora_w = 0, lora_a = 0, lora_v = 0, lora_g = 0;  // ranks of the decay / in-context-rate /
                                                       // value-residual / gate LoRA branches
  // RWKV-X (docs/rwkvx.md): attention blocks N_a (0 = plain RWKV-7), each with C/64 heads of 64
  // and a channel-mix of width attn_ffn_dim. Block order: groups of n_layer / n_attn RWKV blocks,
  // each followed by one attention block.
  int n_attn = 0;
  int attn_ffn_dim = 0;
  bool operator==(const Geometry&) const = default;
};

// Which checkpoint convention a model was loaded from (docs/naming.md).
enum class NamingConvention { kOfficial, kHuggingFace, kTmixCmix };
std::string_view naming_convention_name(NamingConvention c);

}  // namespace wick
