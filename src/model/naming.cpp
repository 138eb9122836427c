// Checkpoint naming conventions (docs/naming.md): detecting a file's convention and renaming its
// tensors onto the official names. The tensors each convention names are the tensor table's
// (model/tensor_table.h); only the naming rules (struct Convention) are written here.
#include "model/naming.h"

#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "base/check.h"
#include "model/tensor_table.h"
#include "wick/errors.h"

namespace wick::model {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// Splits "<prefix><int>.<rest>" into (int, rest).
std::optional<std::pair<int, std::string>> layer_and_rest(std::string_view name,
                                                          std::string_view prefix) {
  if (!starts_with(name, prefix)) return std::nullopt;
  std::string_view s = name.substr(prefix.size());
  size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return std::nullopt;
  int layer = 0;
  auto r = std::from_chars(s.data(), s.data() + dot, layer);
  if (r.ec != std::errc() || r.ptr != s.data() + dot || layer < 0) return std::nullopt;
  if (dot > 1 && s[0] == '0') return std::nullopt;  // no leading zeros
  return std::make_pair(layer, std::string(s.substr(dot + 1)));
}

struct Renamed {
  // In Renaming::block the official suffix inside a block ("att.key.weight"); as returned by
  // rename_in_block the full official name ("blocks.3.att.key.weight").
  std::string official;
  bool linear_layout = false;
};

const char* const kMixes[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};

// How a convention other than the official one names the tensors of the tensor table
// (model/tensor_table.h; docs/naming.md §2). The tensor list is the table's; only these naming
// rules are per convention.
struct Convention {
  std::string_view block_prefix;  // before the block index: "model.layers." / "blocks."
  std::string_view att, ffn;      // time-mix / channel-mix prefixes inside a block
  std::string_view ln1, ln2;      // the block norms
  std::string_view ln_x;          // the time-mix output GroupNorm
  // The LoRA branch b (w, a, v, g): factor applied first, second, and the bias of the second
  // (the official b1, b2, b0), each after att + b.
  std::string_view lora_down, lora_up, lora_bias;
  // Outside the blocks: the official names' stored counterparts.
  std::string_view emb, ln0, ln_out, head;
};

constexpr Convention kFla{"model.layers.",
                          "attn.",
                          "ffn.",
                          "attn_norm.",
                          "ffn_norm.",
                          "attn.g_norm.",
                          "_lora.lora.0.weight",
                          "_lora.lora.2.weight",
                          "_lora.lora.2.bias",
                          "model.embeddings.weight",
                          "model.layers.0.pre_norm.",
                          "model.norm.",
                          "lm_head.weight"};
constexpr Convention kTmix{"blocks.",      "tmix.",      "cmix.",          "ln1.",
                           "ln2.",         "tmix.ln_x.", "_lora_A.weight", "_lora_B.weight",
                           "_lora_B.bias", "emb.weight", "ln0.",           "ln_out.",
                           "head.weight"};

// The stored name of an official name inside a block ("att.key.weight" -> fla
// "attn.k_proj.weight"), and whether that convention stores it as an nn.Linear weight.
std::pair<std::string, bool> stored_block_name(const Convention& c, std::string_view official) {
  auto after = [&](std::string_view p) { return std::string(official.substr(p.size())); };
  if (starts_with(official, "ln1.")) return {std::string(c.ln1) + after("ln1."), false};
  if (starts_with(official, "ln2.")) return {std::string(c.ln2) + after("ln2."), false};
  if (starts_with(official, "att.ln_x.")) return {std::string(c.ln_x) + after("att.ln_x."), false};
  if (starts_with(official, "ffn.")) return {std::string(c.ffn) + after("ffn."), false};
  const std::string rest = after("att.");
  for (auto [name, proj] : {std::pair{"receptance.weight", "r_proj.weight"},
                            {"key.weight", "k_proj.weight"},
                            {"value.weight", "v_proj.weight"},
                            {"output.weight", "o_proj.weight"}})
    if (rest == name) return {std::string(c.att) + proj, false};
  if (rest.size() == 2 && std::string_view("wavg").find(rest[0]) != std::string_view::npos &&
      rest[1] >= '0' && rest[1] <= '2') {
    const std::string_view part = rest[1] == '1'   ? c.lora_down
                                  : rest[1] == '2' ? c.lora_up
                                                   : c.lora_bias;
    return {std::string(c.att) + rest[0] + std::string(part), rest[1] != '0'};
  }
  return {std::string(c.att) + rest, false};
}

// The stored name of an official name outside the blocks (model_tensors()).
std::string stored_top_name(const Convention& c, std::string_view official) {
  if (official == "emb.weight") return std::string(c.emb);
  if (official == "head.weight") return std::string(c.head);
  if (starts_with(official, "ln_out.")) return std::string(c.ln_out).append(official.substr(7));
  if (starts_with(official, "blocks.0.ln0.")) return std::string(c.ln0).append(official.substr(13));
  return std::string(official);
}

// A convention's renaming, from the tensor table: stored block suffix -> official suffix, and
// stored top-level name -> official name.
struct Renaming {
  const Convention& convention;
  std::map<std::string, Renamed> block;
  std::map<std::string, std::string> top;
};

// Two official names mapping to one stored name would make a checkpoint ambiguous: a fault of the
// table or the convention, caught the first time the renaming is built.
Renaming make_renaming(const Convention& c) {
  Renaming r{c, {}, {}};
  for (const LayerSpec& s : layer_tensors()) {
    auto [stored, linear] = stored_block_name(c, s.name);
    const bool added = r.block.emplace(stored, Renamed{std::string(s.name), linear}).second;
    WICK_CHECK(added, "every official block tensor has its own stored name in each convention");
  }
  for (const ModelSpec& s : model_tensors()) {
    const bool added = r.top.emplace(stored_top_name(c, s.name), std::string(s.name)).second;
    WICK_CHECK(added, "every official top-level tensor has its own stored name in each convention");
  }
  return r;
}

const Renaming& fla_renaming() {
  static const Renaming r = make_renaming(kFla);
  return r;
}
const Renaming& tmix_renaming() {
  static const Renaming r = make_renaming(kTmix);
  return r;
}

// The official full name ("blocks.<i>.<official suffix>") and layout of a stored block tensor
// "<block_prefix><i>.<suffix>", if `r` covers it.
std::optional<Renamed> rename_in_block(const Renaming& r, const std::string& name) {
  auto lr = layer_and_rest(name, r.convention.block_prefix);
  if (!lr) return std::nullopt;
  auto it = r.block.find(lr->second);
  if (it == r.block.end()) return std::nullopt;
  return Renamed{"blocks." + std::to_string(lr->first) + "." + it->second.official,
                 it->second.linear_layout};
}

std::string strip_wrapper_prefix(const std::string& name) {
  for (std::string_view p : {"module.", "_orig_mod."}) {
    if (starts_with(name, p)) return name.substr(p.size());
  }
  return name;
}

}  // namespace

std::string official_name_of(const std::string& stored, bool* linear_layout) {
  const std::string name = strip_wrapper_prefix(stored);
  if (linear_layout) *linear_layout = false;
  for (const Renaming* r : {&tmix_renaming(), &fla_renaming()}) {
    if (auto it = r->top.find(name); it != r->top.end()) return it->second;
    if (auto renamed = rename_in_block(*r, name)) {
      if (linear_layout) *linear_layout = renamed->linear_layout;
      return renamed->official;
    }
  }
  return name;
}

OfficialNames map_to_official_names(const io::TensorSet& set) {
  const std::string& path = set.source();
  std::map<std::string, const io::TensorView*> by_name;
  for (const io::TensorView& t : set.tensors()) {
    auto [it, inserted] = by_name.emplace(strip_wrapper_prefix(t.name), &t);
    if (!inserted) {
      throw CheckpointError(path, "two stored tensors, '" + it->second->name + "' and '" + t.name +
                                      "', name the same weight '" + it->first +
                                      "' (a `module.`/`_orig_mod.` wrapper prefix is ignored); "
                                      "expected each weight once");
    }
  }
  auto has = [&](const std::string& n) { return by_name.count(n) != 0; };

  OfficialNames out;
  auto put = [&](const std::string& official, const io::TensorView& view, const std::string& stored,
                 bool linear) {
    if (!out.tensors.emplace(official, MappedTensor{view, stored, linear}).second) {
      throw CheckpointError(path, "two stored tensors map to '" + official + "' (the second is '" +
                                      stored + "'); expected each weight once");
    }
  };

  if (has("blocks.0.att.x_rwkvag") || has("blocks.0.att.time_maa_x") ||
      has("blocks.0.att.time_decay") || has("blocks.0.att.time_mix_k")) {
    std::string kind = has("blocks.0.att.x_rwkvag")     ? "an rwkv.cpp-style dump (fused x_rwkvag)"
                       : has("blocks.0.att.time_maa_x") ? "an RWKV-6 (x060) checkpoint"
                                                        : "an RWKV-4/5 checkpoint";
    throw CheckpointError(path,
                          "this is " + kind +
                              "; wick runs RWKV-7 x070 checkpoints (official, HuggingFace/fla "
                              "or tmix/cmix names, see docs/naming.md)");
  }

  if (has("emb.weight") && has("blocks.0.att.r_k")) {
    out.convention = NamingConvention::kOfficial;
    for (auto& [name, view] : by_name) put(name, *view, view->name, false);
    return out;
  }
  const Renaming* renaming = nullptr;
  if (has("blocks.0.tmix.r_k")) {
    out.convention = NamingConvention::kTmixCmix;
    renaming = &tmix_renaming();
  } else if (has("model.layers.0.attn.r_k") || has("model.embeddings.weight")) {
    out.convention = NamingConvention::kHuggingFace;
    renaming = &fla_renaming();
  }
  if (renaming) {
    for (auto& [name, view] : by_name) {
      if (auto it = renaming->top.find(name); it != renaming->top.end()) {
        put(it->second, *view, view->name, false);
      } else if (auto renamed = rename_in_block(*renaming, name)) {
        put(renamed->official, *view, view->name, renamed->linear_layout);
      } else if (auto lr = layer_and_rest(name, "model.layers.");
                 lr && renaming == &fla_renaming() && lr->second == "attn.x_x") {
        // fla before 2025-04: the six mixes stacked as [6, C], rows r, w, k, v, a, g.
        const io::TensorView& v = *view;
        if (v.shape.size() != 2 || v.shape[0] != 6) {
          throw CheckpointError(path, "tensor '" + v.name +
                                          "': expected the fused mixes as [6, C], found " +
                                          v.shape_string());
        }
        const size_t row_bytes = v.nbytes / 6;
        for (int i = 0; i < 6; ++i) {
          io::TensorView row = v;
          row.shape = {v.shape[1]};
          row.data = v.data + i * row_bytes;
          row.nbytes = row_bytes;
          put("blocks." + std::to_string(lr->first) + ".att." + kMixes[i], row, v.name, false);
        }
      } else {
        out.unmapped.push_back(view->name);
      }
    }
    return out;
  }

  std::string sample;
  int n = 0;
  for (auto& [name, view] : by_name) {
    if (n++ == 8) {
      sample += ", ...";
      break;
    }
    sample += (n > 1 ? ", " : "") + view->name;
  }
  throw CheckpointError(
      path,
      "not an RWKV-7 x070 checkpoint in a known naming convention: expected 'emb.weight' + "
      "'blocks.0.att.r_k' (official), 'blocks.0.tmix.r_k' (tmix/cmix) or "
      "'model.layers.0.attn.r_k' (HuggingFace/fla); found " +
          std::to_string(set.size()) + " tensors: " + (sample.empty() ? "(none)" : sample));
}

}  // namespace wick::model

namespace wick {

std::string_view naming_convention_name(NamingConvention c) {
  switch (c) {
    case NamingConvention::kOfficial:
      return "official";
    case NamingConvention::kHuggingFace:
      return "huggingface-fla";
    case NamingConvention::kTmixCmix:
      return "tmix-cmix";
  }
  return "?";
}

}  // namespace wick
