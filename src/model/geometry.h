// The model geometry from the tensor shapes (docs/x070-math.md §1): one derivation, used by the
// model loader and by the quantiser for its manifest.
#pragma once

#include <string>

#include "model/naming.h"
#include "wick/geometry.h"

namespace wick::model {

// L from the block indices blocks.0 .. blocks.{L-1} (all present), V and C from emb.weight
// [V, C], H and N from blocks.0.att.r_k [H, N] (H*N = C), F from blocks.0.ffn.key.weight [F, C],
// the LoRA ranks from blocks.0.att.{w1,a1,g1} and blocks.1.att.v1 (0 for one block). The RWKV-X
// fields (n_attn, attn_ffn_dim) stay 0. `path` names the checkpoint in messages.
// Throws CheckpointError naming the missing tensor or the shape found and the one expected.
Geometry derive_geometry(const OfficialNames& names, const std::string& path);

// ", in a huggingface-fla checkpoint" for a checkpoint not in the official naming, else "".
std::string convention_hint(NamingConvention c);

}  // namespace wick::model
