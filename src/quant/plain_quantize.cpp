// Plain `.rwkvq` quantisation of a dense checkpoint (docs/rwkvq-format.md §1.5, §3.10).
#include "quant/plain_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "io/mapped_file.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "kernels/fp16.h"
#include "quant/dequant.h"
#include "quant/rwkvq_writer.h"
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
       {"r_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
        "att.receptance.weight", "att.key.weight", "att.value.weight", "att.output.weight"}},
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

std::string shape_text(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
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
                               const std::vector<int64_t>& shape) {
  switch (plan.layout) {
    case Layout::kDense:
      return encode_dense_bf16(w, shape);
    case Layout::kSb6:
      if (shape.size() != 2) break;
      return encode_sb6(w, shape[0], shape[1], plan.bits,
                        plan.mode == "asym_sb6_search" ? Sb6Mode::kSearch : Sb6Mode::kPlain);
    case Layout::kSym:
      if (shape.size() != 2) break;
      return encode_sym(w, shape[0], shape[1], plan.bits,
                        plan.mode == "sym" ? SymMode::kSearch : SymMode::kPlain);
    case Layout::kAsym:
      if (shape.size() != 2) break;
      return encode_asym(w, shape[0], shape[1], plan.bits, plan.gs);
    case Layout::kRtn:
      return encode_rtn(w, shape, plan.bits);
  }
  throw InputError(std::string(layout_name(plan.layout)) + " needs a 2-D tensor, found shape " +
                   shape_text(shape));
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
      for (size_t i = 0; i < n; ++i) out[i] = kernels::f16_at(p, static_cast<int64_t>(i));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = (static_cast<uint32_t>(p[2 * i]) | (static_cast<uint32_t>(p[2 * i + 1])
                                                               << 8))
                           << 16;
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

// Reads the dense checkpoint: a safetensors file, a .pth, or a folder with model.safetensors.
io::TensorSet open_checkpoint(const std::string& in) {
  std::string path = in;
  std::error_code ec;
  if (fs::is_directory(in, ec)) {
    path = (fs::path(in) / "model.safetensors").string();
    if (!fs::exists(path, ec)) {
      throw CheckpointError(in, "a folder without model.safetensors; wick quantize reads a "
                                "single .safetensors file, an official .pth, or a folder holding "
                                "model.safetensors (sharded folders are not supported)");
    }
  }
  auto file = io::MappedFile::open(path);
  if (io::looks_like_zip(*file)) return io::read_pth(file);
  if (!io::looks_like_safetensors(*file)) {
    throw CheckpointError(path, "not a checkpoint: expected a .safetensors file, an official "
                                ".pth (zip) or a folder with model.safetensors");
  }
  io::TensorSet set = io::read_safetensors(file);
  if (set.metadata().count("rwkvq")) {
    throw CheckpointError(path, "this is already a quantised .rwkvq file; wick quantize needs "
                                "the dense checkpoint");
  }
  return set;
}

// Tensors in the input's order: for safetensors the order of their bytes in the file (the order
// the writer put them in; the reader hands them out sorted by name), for .pth the state dict's.
std::vector<const io::TensorView*> input_order(const io::TensorSet& set, bool by_offset) {
  std::vector<const io::TensorView*> v;
  for (const io::TensorView& t : set.tensors()) v.push_back(&t);
  if (by_offset) {
    std::stable_sort(v.begin(), v.end(), [](const io::TensorView* a, const io::TensorView* b) {
      return a->data < b->data;
    });
  }
  return v;
}

// Manifest geometry (§3.10) and naming (§1.6, from the keys).
struct Geometry {
  int64_t n_layer = 0, n_embd = 0, head_size = 0, vocab_size = 0;
  std::string naming;
};

Geometry derive_geometry(const std::vector<const io::TensorView*>& tensors,
                         const std::string& path) {
  static const std::regex kBlock(R"((?:^|\.)(?:blocks|layers)\.(\d+)\.)");
  static const std::regex kWorldAtt(R"(^blocks\.\d+\.(att|ffn)\.)");
  Geometry g;
  int64_t max_block = -1;
  bool has_world_emb = false, has_world_block = false;
  const io::TensorView* emb = nullptr;
  const io::TensorView* rk = nullptr;
  for (const io::TensorView* t : tensors) {
    std::smatch m;
    if (std::regex_search(t->name, m, kBlock)) {
      max_block = std::max<int64_t>(max_block, std::stoll(m[1].str()));
    }
    if (std::regex_search(t->name, kWorldAtt)) has_world_block = true;
    if (t->name == "emb.weight") has_world_emb = true;
    if (!emb && (t->name == "emb.weight" || ends_with(t->name, ".emb.weight") ||
                 ends_with(t->name, "embeddings.weight"))) {
      emb = t;
    }
    if (!rk && ends_with(t->name, "r_k")) rk = t;
  }
  if (!emb || emb->shape.size() != 2) {
    throw CheckpointError(path, "no 2-D embedding (emb.weight) to take the width and vocabulary "
                                "from; is this an RWKV-7 checkpoint?");
  }
  if (!rk || rk->shape.empty()) {
    throw CheckpointError(path, "no r_k tensor to take the head size from; is this an RWKV-7 "
                                "x070 checkpoint?");
  }
  if (max_block < 0) {
    throw CheckpointError(path, "no blocks.N. / layers.N. tensors; is this an RWKV-7 checkpoint?");
  }
  g.n_layer = max_block + 1;
  g.vocab_size = emb->shape[0];
  g.n_embd = emb->shape[1];
  g.head_size = rk->shape.back();
  g.naming = (has_world_emb && has_world_block) ? "world" : "custom";
  return g;
}

bool world_transposed(const std::string& key) {
  static const std::regex kLora(R"(^blocks\.\d+\.att\.[wavg][12]$)");
  return std::regex_match(key, kLora);
}

// The §1.3.2 config object describing what plain quantisation did (group -> bits, block width,
// mode); LoRA groups use the default mode "asym" and so are absent from group_scale_mode.
nlohmann::ordered_json plain_config(const PlainLayout& l) {
  using oj = nlohmann::ordered_json;
  const int b = l.bits;
  const int gs = l.layout == Layout::kSb6 ? 32 : 16;
  const std::string mode = l.layout == Layout::kSb6 ? "asym_sb6" : "sym_plain";
  oj c = oj::object();
  c["bits"] = oj{{"proj", b},  {"w_lora", 6}, {"a_lora", 6}, {"v_lora", 6}, {"g_lora", 8},
                 {"small", 16}, {"cmix", b},  {"emb", 5},    {"head", b}};
  c["clip_percentiles"] = oj::object();
  c["outlier_fracs"] = oj::object();
  c["bits_overrides"] = oj::object();
  c["group_scale"] = oj{{"proj", gs},    {"cmix", gs},    {"emb", 32},    {"head", gs},
                        {"w_lora", 64}, {"a_lora", 64}, {"v_lora", 64}};
  c["group_scale_mode"] =
      oj{{"proj", mode}, {"cmix", mode}, {"emb", "asym_sb6_search"}, {"head", mode}};
  c["act_stats_path"] = nullptr;
  return c;
}

std::string plain_config_repr(const PlainLayout& l) {
  const int b = l.bits;
  return "QuantConfig(proj=" + std::to_string(b) +
         ", w_lora=6, a_lora=6, v_lora=6, g_lora=8, small=16, cmix=" + std::to_string(b) +
         ", emb=5, head=" + std::to_string(b) + ")";
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
  static const std::pair<const char*, PlainLayout> kLayouts[] = {
      {"sb6:4", {Layout::kSb6, 4}}, {"sb6:5", {Layout::kSb6, 5}}, {"sb6:6", {Layout::kSb6, 6}},
      {"sym:8", {Layout::kSym, 8}}, {"sym:6", {Layout::kSym, 6}}};
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
                       const PlainLayout& layout) {
  const std::string group = tensor_group(key);
  if (group == "other" || group == "small" || shape.size() < 2 || is_lora_bias(key) ||
      numel_of(shape) == 0) {
    return dense_plan(group);
  }
  const std::string k(key);
  auto fallback = [&](const std::string& wanted) {
    return rtn8_plan(group, k + ": shape " + shape_text(shape) + " does not fit " + wanted +
                                " (needs a 2-D tensor with a multiple of 256 columns); stored "
                                "as rtn@8");
  };
  if (group == "proj" || group == "cmix" || group == "head") {
    const std::string wanted = std::string(layout.layout == Layout::kSb6 ? "sb6@" : "sym@") +
                               std::to_string(layout.bits);
    if (!fits_superblocks(shape)) return fallback(wanted);
    TensorPlan p;
    p.group = group;
    p.layout = layout.layout;
    p.bits = layout.bits;
    p.gs = layout.layout == Layout::kSb6 ? 32 : 16;
    p.mode = layout.layout == Layout::kSb6 ? "asym_sb6" : "sym_plain";
    return p;
  }
  if (group == "emb") {
    if (!fits_superblocks(shape)) return fallback("sb6@5");
    TensorPlan p;
    p.group = group;
    p.layout = Layout::kSb6;
    p.bits = 5;
    p.gs = 32;
    p.mode = "asym_sb6_search";
    return p;
  }
  if (group == "w_lora" || group == "a_lora" || group == "v_lora") {
    if (shape.size() != 2) {
      return rtn8_plan(group, k + ": shape " + shape_text(shape) +
                                  " is not 2-D as asym@6 needs; stored as rtn@8");
    }
    TensorPlan p;
    p.group = group;
    p.layout = Layout::kAsym;
    p.bits = 6;
    p.gs = 64;
    p.mode = "asym";
    return p;
  }
  return rtn8_plan(group, "");  // g_lora
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
                             const std::vector<int64_t>& shape) {
  if (plan.layout != Layout::kDense) {
    const int64_t n = numel_of(shape);
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(w[i])) {
        throw InputError("cannot quantise a tensor holding NaN or infinity (element " +
                         std::to_string(i) + ")");
      }
    }
  }
  return encode_unchecked(plan, w, shape);
}

QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const PlainQuantizeOptions& options) {
  const PlainLayout& layout = options.layout;
  parse_plain_layout(layout.label());  // validates a hand-built PlainLayout
  io::TensorSet set = open_checkpoint(in);
  const std::string& src = set.source();
  const bool is_pth = set.files().empty() ? false : io::looks_like_zip(*set.files().front());
  const std::vector<const io::TensorView*> tensors = input_order(set, !is_pth);
  const Geometry geo = derive_geometry(tensors, src);

  // Plan every tensor and lay out the container before encoding anything.
  std::vector<TensorPlan> plans;
  std::vector<TensorRecord> records;
  std::vector<BufferSpec> specs;
  QuantizeSummary summary;
  summary.naming = geo.naming;
  summary.layout = layout.label();
  for (const io::TensorView* t : tensors) {
    if (!is_float_dtype(t->dtype)) {
      throw CheckpointError(src, "tensor '" + t->name + "' has dtype " +
                                     std::string(dtype_name(t->dtype)) +
                                     "; wick quantize needs a dense float (F32, F16, BF16) "
                                     "checkpoint");
    }
    TensorPlan plan = plan_tensor(t->name, t->shape, layout);
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
    r.transposed = geo.naming == "world" && world_transposed(t->name);
    for (const EncodedBuffer& b : planned_buffers(plan, t->shape)) {
      if (numel_of(b.shape) == 0) continue;  // never stored (§1.1), so not listed either
      r.fields.push_back(b.field);
      specs.push_back({t->name + "::" + b.field, b.dtype, b.shape});
    }
    if (!plan.note.empty()) summary.notes.push_back(plan.note);
    records.push_back(std::move(r));
    plans.push_back(std::move(plan));
  }

  ManifestHeader header;
  header.format_version = 2;
  header.naming = geo.naming;
  header.n_layer = geo.n_layer;
  header.n_embd = geo.n_embd;
  header.head_size = geo.head_size;
  header.vocab_size = geo.vocab_size;
  header.config_repr = plain_config_repr(layout);
  header.config = plain_config(layout);
  header.tokenizer = options.tokenizer;
  RwkvqContainerWriter writer(out, manifest_text(header, records), specs);

  // Encode one tensor at a time (bounded memory) and put its buffers at their offsets.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const io::TensorView& t = *tensors[i];
    const TensorPlan& plan = plans[i];
    const std::vector<float> w = to_float(t);
    if (plan.layout != Layout::kDense && !all_finite(w)) {
      throw CheckpointError(src, "tensor '" + t.name + "' holds NaN or infinity; it cannot be "
                                 "quantised");
    }
    const EncodedTensor e = encode_unchecked(plan, w.data(), t.shape);
    const std::vector<EncodedBuffer> want = planned_buffers(plan, t.shape);
    if (e.buffers.size() != want.size()) {
      throw Error("internal error: tensor '" + t.name + "' encoded into an unexpected set of "
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
    if ((plan.group == "proj" || plan.group == "cmix" || plan.group == "head") &&
        plan.layout == layout.layout) {
      summary.layout_weights += t.numel();
      summary.layout_bytes += e.stored_bytes();
    }
  }
  summary.file_bytes = writer.commit();
  return summary;
}

}  // namespace wick::quant

namespace wick {

QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const std::string& layout,
                               const std::optional<std::string>& tokenizer) {
  quant::PlainQuantizeOptions o;
  o.layout = quant::parse_plain_layout(layout);
  o.tokenizer = tokenizer;
  return quant::quantize_plain(in, out, o);
}

}  // namespace wick
