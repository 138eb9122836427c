// Maps the three x070 checkpoint naming conventions of docs/naming.md (official BlinkDL,
// fla / HuggingFace, tmix/cmix of rwkv-metal and SwiftRWKV) onto the official names, which are
// wick's internal names. Only names and views change here: no values are touched. Whether a
// LoRA factor is stored in the official orientation (w1 [C, D]) or as an nn.Linear ([D, C]) is
// recorded so the loader can read it the right way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/tensor_set.h"
#include "wick/geometry.h"

namespace wick::model {

struct MappedTensor {
  io::TensorView view;         // the stored tensor (possibly a row slice of a fused tensor)
  std::string stored_name;     // its name in the file, for messages
  bool linear_layout = false;  // LoRA factor stored as nn.Linear weight ([out, in])
};

struct OfficialNames {
  NamingConvention convention = NamingConvention::kOfficial;
  std::map<std::string, MappedTensor> tensors;  // keyed by official name
  std::vector<std::string> unmapped;            // stored names no rule of the convention covers
};

// Detects the convention from the keys (docs/naming.md §7; a leading `module.` or `_orig_mod.`
// is stripped) and renames. Throws CheckpointError when no x070 convention matches (naming
// RWKV-6/5 or other families when recognisable) or when two stored tensors map to one name.
OfficialNames map_to_official_names(const io::TensorSet& set);

// The official name of one stored tensor name in any of the three conventions, without looking at
// the other names of its file (adapter files hold a few tensors only): a `module.`/`_orig_mod.`
// prefix is stripped; tmix/cmix names (`blocks.{i}.tmix.r_proj.weight`, top-level `ln0.*`) and
// fla names (`model.layers.{i}.attn.r_proj.weight`, `model.norm.*`, `lm_head.weight`) are renamed
// by the rules of map_to_official_names; any other name is returned as it is (the caller checks
// it against the tensor table). `linear_layout` (if given) receives whether a renamed LoRA branch
// factor is stored as an nn.Linear weight.
std::string official_name_of(const std::string& stored, bool* linear_layout = nullptr);

}  // namespace wick::model
