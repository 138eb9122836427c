#include "io/naming.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "wick/errors.h"

namespace wick::io {
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
  std::string official;
  bool linear_layout = false;
};

const char* const kMixes[] = {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"};

// fla / HF: suffix after "model.layers.{i}." -> suffix after "blocks.{i}.".
std::optional<Renamed> rename_fla_layer(int layer, const std::string& s) {
  static const std::map<std::string, Renamed> kTable = [] {
    std::map<std::string, Renamed> t;
    for (const char* n : {"weight", "bias"}) {
      t[std::string("attn_norm.") + n] = {std::string("ln1.") + n};
      t[std::string("ffn_norm.") + n] = {std::string("ln2.") + n};
      t[std::string("attn.g_norm.") + n] = {std::string("att.ln_x.") + n};
    }
    for (const char* m : kMixes) t[std::string("attn.") + m] = {std::string("att.") + m};
    for (const char* b : {"w", "a", "v", "g"}) {
      t[std::string("attn.") + b + "_lora.lora.0.weight"] = {std::string("att.") + b + "1", true};
      t[std::string("attn.") + b + "_lora.lora.2.weight"] = {std::string("att.") + b + "2", true};
      if (std::string(b) != "g")
        t[std::string("attn.") + b + "_lora.lora.2.bias"] = {std::string("att.") + b + "0"};
    }
    for (const char* v : {"k_k", "k_a", "r_k"})
      t[std::string("attn.") + v] = {std::string("att.") + v};
    t["attn.r_proj.weight"] = {"att.receptance.weight"};
    t["attn.k_proj.weight"] = {"att.key.weight"};
    t["attn.v_proj.weight"] = {"att.value.weight"};
    t["attn.o_proj.weight"] = {"att.output.weight"};
    t["ffn.x_k"] = {"ffn.x_k"};
    t["ffn.key.weight"] = {"ffn.key.weight"};
    t["ffn.value.weight"] = {"ffn.value.weight"};
    return t;
  }();
  if (layer == 0 && (s == "pre_norm.weight" || s == "pre_norm.bias"))
    return Renamed{"ln0." + s.substr(9)};
  auto it = kTable.find(s);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

// tmix/cmix: suffix after "blocks.{i}." -> suffix after "blocks.{i}.".
std::optional<Renamed> rename_tmix_layer(const std::string& s) {
  static const std::map<std::string, Renamed> kTable = [] {
    std::map<std::string, Renamed> t;
    for (const char* n : {"weight", "bias"}) {
      t[std::string("ln1.") + n] = {std::string("ln1.") + n};
      t[std::string("ln2.") + n] = {std::string("ln2.") + n};
      t[std::string("tmix.ln_x.") + n] = {std::string("att.ln_x.") + n};
    }
    for (const char* m : kMixes) t[std::string("tmix.") + m] = {std::string("att.") + m};
    for (const char* b : {"w", "a", "v", "g"}) {
      t[std::string("tmix.") + b + "_lora_A.weight"] = {std::string("att.") + b + "1", true};
      t[std::string("tmix.") + b + "_lora_B.weight"] = {std::string("att.") + b + "2", true};
      if (std::string(b) != "g")
        t[std::string("tmix.") + b + "_lora_B.bias"] = {std::string("att.") + b + "0"};
    }
    for (const char* v : {"k_k", "k_a", "r_k"})
      t[std::string("tmix.") + v] = {std::string("att.") + v};
    t["tmix.r_proj.weight"] = {"att.receptance.weight"};
    t["tmix.k_proj.weight"] = {"att.key.weight"};
    t["tmix.v_proj.weight"] = {"att.value.weight"};
    t["tmix.o_proj.weight"] = {"att.output.weight"};
    t["cmix.x_k"] = {"ffn.x_k"};
    t["cmix.key.weight"] = {"ffn.key.weight"};
    t["cmix.value.weight"] = {"ffn.value.weight"};
    return t;
  }();
  auto it = kTable.find(s);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
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
  auto take = [&](const std::string& prefix, const std::optional<Renamed>& r) {
    if (!r) return name;
    if (linear_layout) *linear_layout = r->linear_layout;
    return prefix + r->official;
  };
  if (name == "ln0.weight" || name == "ln0.bias") return "blocks.0." + name;
  if (name == "model.embeddings.weight") return "emb.weight";
  if (name == "lm_head.weight") return "head.weight";
  if (name == "model.norm.weight" || name == "model.norm.bias") return "ln_out." + name.substr(11);
  if (auto lr = layer_and_rest(name, "blocks.")) {
    if (starts_with(lr->second, "tmix.") || starts_with(lr->second, "cmix."))
      return take("blocks." + std::to_string(lr->first) + ".", rename_tmix_layer(lr->second));
    return name;
  }
  if (auto lr = layer_and_rest(name, "model.layers."))
    return take("blocks." + std::to_string(lr->first) + ".",
                rename_fla_layer(lr->first, lr->second));
  return name;
}

OfficialNames map_to_official_names(const TensorSet& set) {
  const std::string& path = set.source();
  std::map<std::string, const TensorView*> by_name;
  for (const TensorView& t : set.tensors()) {
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
  auto put = [&](const std::string& official, const TensorView& view, const std::string& stored,
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
  if (has("blocks.0.tmix.r_k")) {
    out.convention = NamingConvention::kTmixCmix;
    for (auto& [name, view] : by_name) {
      if (name == "emb.weight" || name == "head.weight" || starts_with(name, "ln_out.")) {
        put(name, *view, view->name, false);
      } else if (name == "ln0.weight" || name == "ln0.bias") {
        put("blocks.0." + name, *view, view->name, false);
      } else if (auto lr = layer_and_rest(name, "blocks.")) {
        auto r = rename_tmix_layer(lr->second);
        if (r)
          put("blocks." + std::to_string(lr->first) + "." + r->official, *view, view->name,
              r->linear_layout);
        else
          out.unmapped.push_back(view->name);
      } else {
        out.unmapped.push_back(view->name);
      }
    }
    return out;
  }
  if (has("model.layers.0.attn.r_k") || has("model.embeddings.weight")) {
    out.convention = NamingConvention::kHuggingFace;
    for (auto& [name, view] : by_name) {
      if (name == "model.embeddings.weight") {
        put("emb.weight", *view, view->name, false);
      } else if (name == "lm_head.weight") {
        put("head.weight", *view, view->name, false);
      } else if (name == "model.norm.weight" || name == "model.norm.bias") {
        put("ln_out." + name.substr(11), *view, view->name, false);
      } else if (auto lr = layer_and_rest(name, "model.layers.")) {
        const std::string prefix = "blocks." + std::to_string(lr->first) + ".";
        if (lr->second == "attn.x_x") {
          // fla before 2025-04: the six mixes stacked as [6, C], rows r, w, k, v, a, g.
          const TensorView& v = *view;
          if (v.shape.size() != 2 || v.shape[0] != 6) {
            throw CheckpointError(path, "tensor '" + v.name +
                                            "': expected the fused mixes as [6, C], found " +
                                            v.shape_string());
          }
          const size_t row_bytes = v.nbytes / 6;
          for (int i = 0; i < 6; ++i) {
            TensorView row = v;
            row.shape = {v.shape[1]};
            row.data = v.data + i * row_bytes;
            row.nbytes = row_bytes;
            put(prefix + "att." + kMixes[i], row, v.name, false);
          }
          continue;
        }
        auto r = rename_fla_layer(lr->first, lr->second);
        if (r)
          put(prefix + r->official, *view, view->name, r->linear_layout);
        else
          out.unmapped.push_back(view->name);
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

}  // namespace wick::io

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
