// Plain `.rwkvq` quantisation of a dense checkpoint (docs/rwkvq-format.md §1.5, §3.10).
#include "tasks/quantize_file.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/fp16.h"
#include "base/strings.h"
#include "io/checkpoint.h"
#include "io/mapped_file.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "model/geometry.h"
#include "model/naming.h"
#include "quant/dequant.h"
#include "quant/rwkvq_writer.h"
#include "wick/act_stats_file.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

namespace fs = std::filesystem;

struct GroupPatterns {
  const char* group;
  std::vector<const char*> patterns;
};

// §1.5 step 1, in the spec's order (the first group with a matching pattern wins).
const std::vector<GroupPatterns>& group_patterns() {
  static const std::vector<GroupPatterns> kGroups = {
      {"proj",
       {"r_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "att.receptance.weight",
        "att.key.weight", "att.value.weight", "att.output.weight"}},
      {"w_lora", {"w_lora_A", "w_lora_B", ".w0", ".w1", ".w2"}},
      {"a_lora", {"a_lora_A", "a_lora_B", ".a0", ".a1", ".a2"}},
      {"v_lora", {"v_lora_A", "v_lora_B", ".v0", ".v1", ".v2"}},
      {"g_lora", {"g_lora_A", "g_lora_B", ".g1", ".g2"}},
      {"small", {"k_k", "k_a", "r_k"}},
      {"cmix", {"cmix.key.weight", "cmix.value.weight", "ffn.key.weight", "ffn.value.weight"}},
      {"emb", {"emb.weight"}},
      {"head", {"head.weight"}},
  };
  return kGroups;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// LoRA biases are never quantised (§1.5 step 2: one scale for w0 broke the decay gate).
bool is_lora_bias(std::string_view key) {
  for (const char* s : {".w_lora_B.bias", ".a_lora_B.bias", ".v_lora_B.bias", ".w0", ".a0", ".v0"})
    if (ends_with(key, s)) return true;
  return false;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Block layouts need a matrix whose row length is a whole number of 256-wide superblocks.
bool fits_superblocks(const std::vector<int64_t>& shape) {
  return shape.size() == 2 && shape[0] > 0 && shape[1] > 0 && shape[1] % 256 == 0;
}

TensorPlan dense_plan(std::string group) {
  TensorPlan p;
  p.group = std::move(group);
  p.layout = Layout::kDense;
  p.bits = 16;
  p.mode = "dense";
  return p;
}

TensorPlan rtn8_plan(std::string group, std::string note) {
  TensorPlan p;
  p.group = std::move(group);
  p.layout = Layout::kRtn;
  p.bits = 8;
  p.mode = "rtn";
  p.note = std::move(note);
  return p;
}

bool all_finite(const std::vector<float>& w) {
  for (float x : w)
    if (!std::isfinite(x)) return false;
  return true;
}

EncodedTensor encode_unchecked(const TensorPlan& plan, const float* w,
                               const std::vector<int64_t>& shape, const float* act) {
  const float* a = plan.weighted ? act : nullptr;
  if (plan.weighted && !act) throw InputError("internal error: weighted plan without statistics");
  switch (plan.layout) {
    case Layout::kDense:
      return encode_dense_bf16(w, shape);
    case Layout::kSb6: {
      if (shape.size() != 2) break;
      const Sb6Mode mode = plan.weighted                    ? Sb6Mode::kActivationWeighted
                           : plan.mode == "asym_sb6_search" ? Sb6Mode::kSearch
                                                            : Sb6Mode::kPlain;
      return encode_sb6(w, shape[0], shape[1], plan.bits, mode, a);
    }
    case Layout::kSym: {
      if (shape.size() != 2) break;
      const SymMode mode = plan.weighted        ? SymMode::kActivationWeighted
                           : plan.mode == "sym" ? SymMode::kSearch
                                                : SymMode::kPlain;
      return encode_sym(w, shape[0], shape[1], plan.bits, mode, a);
    }
    case Layout::kAsym:
      if (shape.size() != 2) break;
      return encode_asym(w, shape[0], shape[1], plan.bits, plan.gs);
    case Layout::kRtn:
      return encode_rtn(w, shape, plan.bits, a);
  }
  throw InputError(std::string(layout_name(plan.layout)) + " needs a 2-D tensor, found shape " +
                   base::shape_string(shape));
}

// Input tensor -> float32 (exact widening of bf16 / fp16).
std::vector<float> to_float(const io::TensorView& t) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  const uint8_t* p = t.data;
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(out.data(), p, n * 4);
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) out[i] = base::f16_at(p, static_cast<int64_t>(i));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u =
            (static_cast<uint32_t>(p[2 * i]) | (static_cast<uint32_t>(p[2 * i + 1]) << 8)) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        out[i] = f;
      }
      break;
    default:
      break;  // refused by the caller
  }
  return out;
}

// Reads the dense checkpoint through the one opener (io/checkpoint.h): a safetensors file, an
// official .pth, or a HuggingFace folder (single or sharded model.safetensors).
io::Checkpoint open_dense_checkpoint(const std::string& in) {
  io::Checkpoint c = io::open_checkpoint(in);
  if (c.tensors.metadata().count("rwkvq")) {
    throw CheckpointError(in,
                          "this is already a quantised .rwkvq file; wick quantize needs "
                          "the dense checkpoint");
  }
  return c;
}

// Tensors in the input's order: for safetensors the order of their bytes in the file (the order
// the writer put them in; the reader hands them out sorted by name) - shard by shard in the order
// the set holds the shard files - for .pth the state dict's.
std::vector<const io::TensorView*> input_order(const io::TensorSet& set, bool by_offset) {
  std::vector<const io::TensorView*> v;
  for (const io::TensorView& t : set.tensors()) v.push_back(&t);
  if (by_offset) {
    auto position = [&set](const io::TensorView* t) {
      size_t file = 0;
      while (file < set.files().size() && !set.files()[file]->holds(t->data, t->nbytes)) ++file;
      return std::pair{file, reinterpret_cast<uintptr_t>(t->data)};
    };
    std::stable_sort(v.begin(), v.end(), [&](const io::TensorView* a, const io::TensorView* b) {
      return position(a) < position(b);
    });
  }
  return v;
}

// The manifest's naming (§1.6, from the keys): "world" for the official names, else "custom".
std::string manifest_naming(const std::vector<const io::TensorView*>& tensors) {
  static const std::regex kWorldAtt(R"(^blocks\.\d+\.(att|ffn)\.)");
  bool has_world_emb = false, has_world_block = false;
  for (const io::TensorView* t : tensors) {
    if (std::regex_search(t->name, kWorldAtt)) has_world_block = true;
    if (t->name == "emb.weight") has_world_emb = true;
  }
  return has_world_emb && has_world_block ? "world" : "custom";
}

bool world_transposed(const std::string& key) {
  static const std::regex kLora(R"(^blocks\.\d+\.att\.[wavg][12]$)");
  return std::regex_match(key, kLora);
}

// The metadata an RWKV-X checkpoint (moba.{j}.* attention blocks beside rwkv.*) keeps in its
// .rwkvq: what its loader reads (model/load_rwkvx.cpp) - the block counts it checks against the
// tensors and the default moba block size and top-k. Nothing for an x070 checkpoint, whose file
// stays exactly what rwkv-quant writes.
bool is_rwkvx(const io::TensorSet& set) {
  for (const io::TensorView& t : set.tensors())
    if (t.name.rfind("moba.", 0) == 0) return true;
  return false;
}

std::map<std::string, std::string> carried_metadata(const io::TensorSet& set) {
  std::map<std::string, std::string> out;
  if (!is_rwkvx(set)) return out;
  for (const char* key : {"n_attn_layer", "n_rwkv_layer", "wick.synth.attention_blocks",
                          "moba_chunk_size", "moba_topk"}) {
    auto it = set.metadata().find(key);
    if (it != set.metadata().end()) out.insert(*it);
  }
  return out;
}

std::string layout_label(const EncodedTensor& e) {
  if (e.layout == Layout::kDense) return "dense bf16";
  return std::string(layout_name(e.layout)) + "@" + std::to_string(e.bits);
}

}  // namespace

std::string PlainLayout::label() const {
  return std::string(layout_name(layout)) + ":" + std::to_string(bits);
}

PlainLayout parse_plain_layout(std::string_view text) {
  static const std::pair<const char*, PlainLayout> kLayouts[] = {{"sb6:4", {Layout::kSb6, 4}},
                                                                 {"sb6:5", {Layout::kSb6, 5}},
                                                                 {"sb6:6", {Layout::kSb6, 6}},
                                                                 {"sym:8", {Layout::kSym, 8}},
                                                                 {"sym:6", {Layout::kSym, 6}}};
  for (const auto& [name, l] : kLayouts)
    if (text == name) return l;
  throw InputError("unknown layout '" + std::string(text) +
                   "': expected sb6:4, sb6:5, sb6:6, sym:8 or sym:6");
}

std::string tensor_group(std::string_view key) {
  for (const GroupPatterns& g : group_patterns()) {
    for (const char* p : g.patterns)
      if (key.find(p) != std::string_view::npos) return g.group;  // endswith(p) implies p in key
  }
  return "other";
}

TensorPlan plan_tensor(std::string_view key, const std::vector<int64_t>& shape,
                       const QuantConfig& config, const float* act, int64_t act_len) {
  const std::string group = tensor_group(key);
  if (group == "other" || shape.size() < 2 || is_lora_bias(key) || numel_of(shape) == 0) {
    return dense_plan(group);
  }
  int bits = config.bits_of(group);
  for (const auto& [substring, b] : config.bits_overrides) {
    if (key.find(substring) != std::string_view::npos) {
      bits = b;
      break;
    }
  }
  if (bits == 16) return dense_plan(group);
  const std::string k(key);
  const bool have_stats = act != nullptr && shape.size() == 2 && act_len == shape[1];
  auto fallback = [&](const std::string& wanted) {
    return rtn8_plan(group, k + ": shape " + base::shape_string(shape) + " does not fit " + wanted +
                                " (needs a 2-D tensor with a multiple of 256 columns); stored "
                                "as rtn@8");
  };
  TensorPlan p;
  p.group = group;
  p.bits = bits;
  auto gs = config.group_scale.find(group);
  if (gs != config.group_scale.end()) {
    auto m = config.group_scale_mode.find(group);
    const std::string mode = m == config.group_scale_mode.end() ? "asym" : m->second;
    p.gs = gs->second;
    p.requested_mode = mode;
    if (mode.rfind("asym_sb6", 0) == 0 || mode.rfind("sym", 0) == 0) {
      const bool sb6 = mode.rfind("asym_sb6", 0) == 0;
      if (!fits_superblocks(shape))
        return fallback(std::string(sb6 ? "sb6@" : "sym@") + std::to_string(bits));
      p.layout = sb6 ? Layout::kSb6 : Layout::kSym;
      p.mode = mode;
      if (mode == "asym_sb6_aw" || mode == "sym_aw") {
        if (have_stats) {
          p.weighted = true;
        } else {
          p.mode = sb6 ? "asym_sb6_search" : "sym";
          p.note = k + ": no activation statistics for this key, so " + mode + " ran as " + p.mode +
                   " (unweighted search)";
        }
      }
      return p;
    }
    if (shape.size() != 2) {
      return rtn8_plan(group, k + ": shape " + base::shape_string(shape) + " is not 2-D as asym@" +
                                  std::to_string(bits) + " needs; stored as rtn@8");
    }
    p.layout = Layout::kAsym;
    p.mode = "asym";
    return p;
  }
  // No block width: per-row rtn, activation-weighted when this key has statistics (§1.5 step 5).
  p.layout = Layout::kRtn;
  p.requested_mode = "rtn";
  if (bits <= 4 && shape.size() != 2) {
    return rtn8_plan(group, k + ": rtn@" + std::to_string(bits) +
                                " packs codes of 2-D tensors only; stored as rtn@8");
  }
  const int64_t cols = numel_of(shape) / shape[0];
  p.weighted = act != nullptr && act_len == cols;
  p.mode = p.weighted ? "rtn_aw" : "rtn";
  return p;
}

TensorPlan plan_tensor(std::string_view key, const std::vector<int64_t>& shape,
                       const PlainLayout& layout) {
  return plan_tensor(key, shape,
                     QuantConfig::plain(layout.layout == Layout::kSb6 ? "sb6" : "sym", layout.bits),
                     nullptr, 0);
}

std::vector<EncodedBuffer> planned_buffers(const TensorPlan& plan,
                                           const std::vector<int64_t>& shape) {
  auto buf = [](const char* f, DType d, std::vector<int64_t> s) {
    EncodedBuffer b;
    b.field = f;
    b.dtype = d;
    b.shape = std::move(s);
    return b;
  };
  std::vector<EncodedBuffer> v;
  const int64_t rows = shape.empty() ? 1 : shape[0];
  const int64_t cols = shape.size() >= 2 ? shape[1] : 0;
  switch (plan.layout) {
    case Layout::kDense:
      v.push_back(buf("dense", DType::BF16, shape));
      break;
    case Layout::kSb6:
      v.push_back(buf("codes_packed", DType::U8, {rows, cols / 2}));
      v.push_back(buf("gw_d", DType::F16, {rows, cols / 256}));
      v.push_back(buf("gw_dm", DType::F16, {rows, cols / 256}));
      v.push_back(buf("gw_qsqm", DType::U8, {rows, cols / 256, 12}));
      if (plan.bits >= 5) v.push_back(buf("gw_qh", DType::U8, {rows, cols / 8}));
      if (plan.bits == 6) v.push_back(buf("gw_qh2", DType::U8, {rows, cols / 8}));
      break;
    case Layout::kSym:
      if (plan.bits == 8) {
        v.push_back(buf("codes", DType::I8, {rows, cols}));
      } else {
        v.push_back(buf("codes_packed", DType::U8, {rows, cols / 2}));
      }
      v.push_back(buf("gw_d", DType::F16, {rows, cols / 256}));
      if (plan.bits == 6) {
        v.push_back(buf("gw_qh", DType::U8, {rows, cols / 8}));
        v.push_back(buf("gw_qh2", DType::U8, {rows, cols / 8}));
      }
      v.push_back(buf("gw_qs", DType::I8, {rows, cols / 16}));
      break;
    case Layout::kAsym: {
      const int64_t nb = (cols + plan.gs - 1) / plan.gs;
      v.push_back(buf("codes", DType::U8, {rows, cols}));
      v.push_back(buf("gw_scale", DType::F32, {rows, nb}));
      v.push_back(buf("gw_min", DType::F32, {rows, nb}));
      break;
    }
    case Layout::kRtn: {
      const int64_t rcols = rows > 0 ? numel_of(shape) / rows : 0;
      if (plan.bits >= 5) {
        v.push_back(buf("codes", DType::I8, shape));
      } else {
        v.push_back(buf("codes_packed", DType::U8, {rows, (rcols + 1) / 2}));
      }
      std::vector<int64_t> s(shape.size(), 1);
      s[0] = rows;
      v.push_back(buf("scale", DType::F16, s));
      break;
    }
  }
  return v;
}

EncodedTensor encode_planned(const TensorPlan& plan, const float* w,
                             const std::vector<int64_t>& shape, const float* act) {
  if (plan.layout != Layout::kDense) {
    const int64_t n = numel_of(shape);
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(w[i])) {
        throw InputError("cannot quantise a tensor holding NaN or infinity (element " +
                         std::to_string(i) + ")");
      }
    }
  }
  return encode_unchecked(plan, w, shape, act);
}

QuantizeSummary quantize_checkpoint(const std::string& in, const std::string& out,
                                    const FileQuantizeOptions& options) {
  const QuantConfig& config = options.config;
  const io::Checkpoint checkpoint = open_dense_checkpoint(in);
  const io::TensorSet& set = checkpoint.tensors;
  const std::string& src = set.source();
  const bool is_pth = checkpoint.container == "pth";
  const std::vector<const io::TensorView*> tensors = input_order(set, !is_pth);
  // The manifest geometry (§3.10) is the model's, derived as the loader derives it (an RWKV-X
  // checkpoint's from its RWKV-7 part, rwkv.*).
  const bool rwkvx = is_rwkvx(set);
  const Geometry geo = model::derive_geometry(
      model::map_to_official_names(rwkvx ? io::strip_prefix(set, "rwkv.") : set), src);
  const std::string naming = manifest_naming(tensors);
  const ActStats* stats = options.stats ? &*options.stats : nullptr;
  // `wick act-stats` keys an RWKV-X model's RWKV-7 blocks by their official names, without the
  // checkpoint's `rwkv.` prefix (its attention blocks have no statistics).
  const std::string stats_prefix = rwkvx ? "rwkv." : "";

  // Plan every tensor and lay out the container before encoding anything.
  std::vector<TensorPlan> plans;
  std::vector<const std::vector<float>*> acts;
  std::vector<TensorRecord> records;
  std::vector<BufferSpec> specs;
  QuantizeSummary summary;
  summary.naming = naming;
  summary.layout = options.label;
  summary.config_repr = config.repr();
  std::map<std::string, std::vector<std::string>> degraded;  // requested AW mode -> keys
  for (const io::TensorView* t : tensors) {
    if (!is_float_dtype(t->dtype)) {
      throw CheckpointError(src, "tensor '" + t->name + "' has dtype " +
                                     std::string(dtype_name(t->dtype)) +
                                     "; wick quantize needs a dense float (F32, F16, BF16) "
                                     "checkpoint");
    }
    const std::vector<float>* act = nullptr;
    if (stats) {
      auto it = stats->find(t->name);
      if (it == stats->end() && !stats_prefix.empty() && t->name.rfind(stats_prefix, 0) == 0)
        it = stats->find(t->name.substr(stats_prefix.size()));
      if (it != stats->end()) {
        const int64_t in_features = t->shape.size() >= 2 ? numel_of(t->shape) / t->shape[0] : 0;
        if (static_cast<int64_t>(it->second.size()) == in_features) {
          act = &it->second;
        } else {
          summary.warnings.push_back("activation statistics for '" + t->name + "' have " +
                                     std::to_string(it->second.size()) +
                                     " channels but the tensor has " + std::to_string(in_features) +
                                     " input columns; ignored (stats of another model?)");
        }
      }
    }
    TensorPlan plan = plan_tensor(t->name, t->shape, config, act ? act->data() : nullptr,
                                  act ? static_cast<int64_t>(act->size()) : 0);
    if (!plan.weighted) act = nullptr;
    if ((plan.requested_mode == "asym_sb6_aw" || plan.requested_mode == "sym_aw") &&
        !plan.weighted && plan.layout != Layout::kRtn) {
      degraded[plan.requested_mode + " -> " + plan.mode].push_back(t->name);
      plan.note.clear();  // reported once per mode below
    }
    TensorRecord r;
    r.key = t->name;
    r.kind = std::string(layout_name(plan.layout));
    r.shape = t->shape;
    r.bits = plan.bits;
    r.group = plan.group;
    if (plan.layout == Layout::kSb6 || plan.layout == Layout::kSym) {
      r.gw_gs = plan.gs;
      r.gw_sb = plan.layout == Layout::kSb6 ? 8 : 16;
      r.n_blocks = t->shape[1] / plan.gs;
    } else if (plan.layout == Layout::kAsym) {
      r.gw_gs = plan.gs;
      r.n_blocks = (t->shape[1] + plan.gs - 1) / plan.gs;
    }
    r.transposed = naming == "world" && world_transposed(t->name);
    for (const EncodedBuffer& b : planned_buffers(plan, t->shape)) {
      if (numel_of(b.shape) == 0) continue;  // never stored (§1.1), so not listed either
      r.fields.push_back(b.field);
      specs.push_back({t->name + "::" + b.field, b.dtype, b.shape});
    }
    if (!plan.note.empty()) summary.notes.push_back(plan.note);
    if (plan.weighted) summary.weighted_tensors += 1;
    records.push_back(std::move(r));
    plans.push_back(std::move(plan));
    acts.push_back(act);
  }
  for (const auto& [change, keys] : degraded) {
    std::string list;
    for (size_t i = 0; i < keys.size() && i < 4; ++i) list += (i ? ", " : "") + keys[i];
    if (keys.size() > 4) list += ", ... (" + std::to_string(keys.size()) + " tensors)";
    const bool only_emb = keys.size() == 1 && tensor_group(keys[0]) == "emb";
    summary.warnings.push_back(
        std::string(only_emb ? "" : "NO ACTIVATION STATISTICS: ") + change + " for " + list +
        (only_emb ? " (an embedding is a gather: no statistics exist for it, as in rwkv-quant)"
                  : (stats ? " (the statistics file has no entry for these keys)"
                           : " (no --act-stats file given; rwkv-quant switches silently, the "
                             "file differs from one quantised with statistics)")));
  }

  ManifestHeader header;
  header.format_version = 2;
  header.naming = naming;
  header.n_layer = geo.n_layer;
  header.n_embd = geo.n_embd;
  header.head_size = geo.head_size;
  header.vocab_size = geo.vocab;
  header.config_repr = config.repr();
  header.config = config.to_json();
  header.tokenizer = options.tokenizer;
  RwkvqContainerWriter writer(out, manifest_text(header, records), specs, carried_metadata(set));

  // Encode one tensor at a time (bounded memory) and put its buffers at their offsets.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const io::TensorView& t = *tensors[i];
    const TensorPlan& plan = plans[i];
    const std::vector<float> w = to_float(t);
    if (plan.layout != Layout::kDense && !all_finite(w)) {
      throw CheckpointError(src, "tensor '" + t.name +
                                     "' holds NaN or infinity; it cannot be "
                                     "quantised");
    }
    const EncodedTensor e =
        encode_unchecked(plan, w.data(), t.shape, acts[i] ? acts[i]->data() : nullptr);
    const std::vector<EncodedBuffer> want = planned_buffers(plan, t.shape);
    if (e.buffers.size() != want.size()) {
      throw Error("internal error: tensor '" + t.name +
                  "' encoded into an unexpected set of "
                  "buffers");
    }
    for (size_t k = 0; k < want.size(); ++k) {
      const EncodedBuffer& b = e.buffers[k];
      if (b.field != want[k].field || b.dtype != want[k].dtype || b.shape != want[k].shape) {
        throw Error("internal error: tensor '" + t.name + "' buffer " + b.field +
                    " does not match its planned layout");
      }
      writer.write(t.name + "::" + b.field, b.bytes.data(), b.bytes.size());
    }
    summary.tensors += 1;
    summary.tensors_per_layout[layout_label(e)] += 1;
    if (options.progress)
      options.progress(static_cast<int64_t>(i) + 1, static_cast<int64_t>(tensors.size()));
    if (plan.group == "proj" || plan.group == "cmix" || plan.group == "head") {
      summary.layout_weights += t.numel();
      summary.layout_bytes += e.stored_bytes();
    }
  }
  summary.file_bytes = writer.commit();
  return summary;
}

QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const PlainQuantizeOptions& options) {
  const PlainLayout& layout = options.layout;
  parse_plain_layout(layout.label());  // validates a hand-built PlainLayout
  FileQuantizeOptions o;
  o.config = QuantConfig::plain(layout.layout == Layout::kSb6 ? "sb6" : "sym", layout.bits);
  o.tokenizer = options.tokenizer;
  o.label = layout.label();
  o.progress = options.progress;
  return quantize_checkpoint(in, out, o);
}

}  // namespace wick::quant

namespace wick {

QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const std::string& layout,
                               const std::optional<std::string>& tokenizer,
                               const ProgressFn& progress) {
  quant::PlainQuantizeOptions o;
  o.layout = quant::parse_plain_layout(layout);
  o.tokenizer = tokenizer;
  o.progress = progress;
  return quant::quantize_plain(in, out, o);
}

QuantizeSummary quantize(const std::string& in, const std::string& out,
                         const QuantizeOptions& options) {
  quant::FileQuantizeOptions o;
  if (!options.config_path.empty()) {
    std::ifstream f(options.config_path, std::ios::binary);
    if (!f) throw FileError(options.config_path, "cannot open the quantisation config");
    std::stringstream ss;
    ss << f.rdbuf();
    o.config = quant::QuantConfig::from_file_text(ss.str(), options.config_path);
    o.label = "config " + options.config_path;
    if (!options.preset.empty()) {
      throw InputError(
          "--preset and --config both given: the config file replaces the preset; "
          "pass one of them");
    }
  } else {
    o.config = quant::QuantConfig::preset(options.preset.empty() ? "reduction" : options.preset);
    o.label = "preset " + (options.preset.empty() ? std::string("reduction") : options.preset);
  }
  if (!options.act_stats_path.empty()) {
    o.stats = load_act_stats(options.act_stats_path);
    o.config.act_stats_path = options.act_stats_path;
  } else {
    o.config.act_stats_path.clear();
  }
  o.tokenizer = options.tokenizer;
  o.progress = options.progress;
  return quant::quantize_checkpoint(in, out, o);
}

}  // namespace wick
