// LoraAdapter::load (wick/lora.h): an adapter file read strictly against a base geometry through
// the tensor table (model/tensor_table.h) and the naming rules (model/naming.h); and
// Model::with_adapter.
#include "model/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include "base/sha256.h"
#include "base/strings.h"
#include "io/checkpoint.h"
#include "io/tensor_set.h"
#include "model/model_impl.h"
#include "model/naming.h"
#include "model/tensor_table.h"
#include "wick/errors.h"

namespace wick {
namespace {

using model::kLoraTargets;
using model::LayerSpec;
using model::ModelSpec;
using model::Role;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// "blocks.{i}.<rest>" -> (i, rest); i in decimal without leading zeros.
std::optional<std::pair<int64_t, std::string>> block_and_rest(const std::string& name) {
  const std::string prefix = "blocks.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 9)
    return std::nullopt;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + dot;
  if (e - b > 1 && *b == '0') return std::nullopt;
  int64_t layer = 0;
  auto r = std::from_chars(b, e, layer);
  if (r.ec != std::errc() || r.ptr != e) return std::nullopt;
  return std::make_pair(layer, name.substr(dot + 1));
}

const LayerSpec* layer_spec(const std::string& rest) {
  for (const LayerSpec& s : model::layer_tensors())
    if (s.name == rest) return &s;
  return nullptr;
}

const ModelSpec* model_spec(const std::string& name) {
  for (const ModelSpec& s : model::model_tensors())
    if (s.name == name) return &s;
  return nullptr;
}

int target_index(const LayerSpec& s) {
  for (int t = 0; t < kLoraTargets; ++t)
    if (s.lin == model::kLoraTargetSlots[t]) return t;
  return -1;
}

constexpr const char* kTargetsHelp =
    "the adapted matrices are blocks.{i}.att.{receptance,key,value,output} and "
    "blocks.{i}.ffn.{key,value} (RWKV-PEFT .lora_A/.lora_B), or blocks.{i}.tmix.{r,k,v,o}_proj and "
    "blocks.{i}.cmix.{key,value} (rwkv-metal .lora_a/.lora_b)";

struct PairViews {
  const io::TensorView* a = nullptr;
  const io::TensorView* b = nullptr;
  std::string official;  // "blocks.0.att.key.weight"
};

// A replaced norm: where it goes and its view.
struct NormViews {
  const io::TensorView* view = nullptr;
  std::string official;
  int64_t layer = -1;  // -1: model level (ln0, ln_out)
  std::vector<float> model::LayerWeights::*layer_member = nullptr;
  std::vector<float> model::ModelWeights::*model_member = nullptr;
};

std::optional<double> parse_decimal(const std::string& s) {
  double v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || r.ptr != e || s.empty()) return std::nullopt;
  return v;
}

std::string num(double v) {
  return fmt::format("{}", v);
}

// The multiplier alpha / r · lora_scale is applied as a float: it must be one.
void check_applied_scale(double scale, const std::string& path) {
  if (!(std::fabs(scale) <= std::numeric_limits<float>::max()))
    throw InputError("LoRA scale alpha / rank * lora_scale = " + num(scale) + " for " + path +
                     " is beyond the float range; give a smaller alpha or scale");
}

// The adapter's fingerprint: its content digest and the scale as the passes apply it (float), so
// two adapters that compute the same terms share it.
std::string scaled_fingerprint(const std::string& content_digest, double scale) {
  const float applied = static_cast<float>(scale);
  const char zero = 0;
  base::Sha256 h;
  h.update("wick-lora-adapter-v1").update(&zero, 1).update(content_digest).update(&zero, 1);
  h.update(&applied, sizeof applied);
  return "sha256:" + h.hex_digest();
}

void check_dtype_and_values(const std::string& path, const io::TensorView& t) {
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16) {
    throw CheckpointError(path, "tensor '" + t.name + "' is stored as " +
                                    std::string(dtype_name(t.dtype)) +
                                    "; expected fp32, fp16 or bf16 (convert the adapter)");
  }
  bool nan = false;
  if (const int64_t i = io::first_nonfinite(t, &nan); i >= 0) {
    throw CheckpointError(path, "tensor '" + t.name + "' holds " +
                                    (nan ? std::string("NaN") : std::string("an infinity")) +
                                    " at element " + std::to_string(i) +
                                    "; expected finite values: the adapter is damaged or its "
                                    "training diverged");
  }
}

}  // namespace

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& path, const Model& base,
                                                     const LoraOptions& options) {
  const Geometry& g = base.geometry();
  if (g.n_attn > 0) {
    throw CheckpointError(path, "LoRA adapters are supported for plain RWKV-7 x070 models; " +
                                    base.info().source +
                                    " is an RWKV-X hybrid (attention blocks): run it without "
                                    "the adapter");
  }
  const std::string file_name = lower(std::filesystem::path(path).filename().string());
  if (file_name.find("pissa") != std::string::npos) {
    throw CheckpointError(path,
                          "this looks like a PiSSA adapter (the file name says pissa); PiSSA "
                          "is not supported: it needs RWKV-PEFT's init_pissa.pth "
                          "(W <- W - B0*A0 + B*A, no scaling). Merge it with RWKV-PEFT's "
                          "merge_pissa.py and load the merged model");
  }
  auto file = io::MappedFile::open(path);
  io::TensorSet set = io::read_tensor_file(file);

  std::map<std::pair<int64_t, int>, PairViews> pairs;
  std::vector<NormViews> norms;
  std::map<std::string, std::string> norm_seen;  // official -> stored
  for (const io::TensorView& t : set.tensors()) {
    const std::vector<std::string> parts = split_dots(lower(t.name));
    for (const std::string& p : parts) {
      if (p.rfind("init_lora_", 0) == 0 || p == "pissa") {
        throw CheckpointError(path, "tensor '" + t.name +
                                        "' belongs to a PiSSA adapter (or its init_pissa.pth); "
                                        "PiSSA is not supported: it needs the init file "
                                        "(W <- W - B0*A0 + B*A). Merge it with RWKV-PEFT's "
                                        "merge_pissa.py and load the merged model");
      }
      if (p == "disha" || p == "bone" || p == "bat") {
        throw CheckpointError(path, "tensor '" + t.name +
                                        "' belongs to a DiSHA (bone/bat) adapter; DiSHA is a "
                                        "merge-only format wick does not support. Merge it with "
                                        "RWKV-PEFT's merge script and load the merged model");
      }
    }
    const bool is_a = ends_with(t.name, ".lora_A") || ends_with(t.name, ".lora_a");
    const bool is_b = ends_with(t.name, ".lora_B") || ends_with(t.name, ".lora_b");
    if (is_a || is_b) {
      const std::string target = t.name.substr(0, t.name.size() - 7);
      const std::string official = model::official_name_of(target + ".weight");
      auto br = block_and_rest(official);
      const LayerSpec* spec = br ? layer_spec(br->second) : nullptr;
      const int ti = spec ? target_index(*spec) : -1;
      if (ti < 0) {
        throw CheckpointError(path, "tensor '" + t.name + "': '" + target +
                                        "' is not a matrix wick adapts; " + kTargetsHelp +
                                        ". Remove this tensor or use an adapter trained for "
                                        "those matrices");
      }
      if (br->first >= g.n_layer) {
        throw CheckpointError(path, "tensor '" + t.name + "' adapts layer " +
                                        std::to_string(br->first) + ", but " + base.info().source +
                                        " has " + std::to_string(g.n_layer) + " layers (0.." +
                                        std::to_string(g.n_layer - 1) +
                                        "); the adapter was trained for another model");
      }
      PairViews& pv = pairs[{br->first, ti}];
      pv.official = official;
      const io::TensorView*& slot = is_a ? pv.a : pv.b;
      if (slot != nullptr) {
        throw CheckpointError(path, "tensors '" + slot->name + "' and '" + t.name +
                                        "' are both the LoRA factor " + (is_a ? "A" : "B") +
                                        " of " + official +
                                        "; expected each factor once (one naming convention)");
      }
      slot = &t;
      continue;
    }
    // A full tensor: it must name a norm of the model.
    const std::string official = model::official_name_of(t.name);
    NormViews nv;
    nv.view = &t;
    nv.official = official;
    std::vector<int64_t> expected;
    bool known = false, is_norm = false;
    if (const ModelSpec* ms = model_spec(official)) {
      known = true;
      is_norm = ms->role == Role::kNorm;
      nv.model_member = ms->vec;
      expected = model::official_shape(*ms, g);
    } else if (auto br = block_and_rest(official)) {
      if (const LayerSpec* ls = layer_spec(br->second)) {
        known = true;
        is_norm = ls->role == Role::kNorm;
        nv.layer = br->first;
        nv.layer_member = ls->vec;
        expected = model::official_shape(*ls, g);
        if (is_norm && br->first >= g.n_layer) {
          throw CheckpointError(path, "tensor '" + t.name + "' replaces a norm of layer " +
                                          std::to_string(br->first) + ", but " +
                                          base.info().source + " has " + std::to_string(g.n_layer) +
                                          " layers; the adapter was trained for another model");
        }
      }
    }
    if (!known) {
      throw CheckpointError(path, "tensor '" + t.name +
                                      "' is neither a LoRA factor (.lora_A/.lora_B, "
                                      ".lora_a/.lora_b) nor a tensor of the base model; " +
                                      kTargetsHelp + ". Is this a LoRA adapter file?");
    }
    if (!is_norm) {
      throw CheckpointError(path, "tensor '" + t.name + "' would replace the base tensor '" +
                                      official +
                                      "', which is not a LayerNorm/GroupNorm; at run time wick "
                                      "replaces only the norms (ln0, ln1, ln2, att.ln_x, "
                                      "ln_out). Train with the norms only, or merge the adapter "
                                      "with the trainer's merge script");
    }
    if (t.shape != expected) {
      throw CheckpointError(path, "tensor '" + t.name + "' replaces '" + official +
                                      "': expected shape " + base::shape_string(expected) +
                                      ", found " + t.shape_string() +
                                      "; the adapter was trained for another model");
    }
    if (auto [it, inserted] = norm_seen.emplace(official, t.name); !inserted) {
      throw CheckpointError(path, "tensors '" + it->second + "' and '" + t.name +
                                      "' both replace '" + official + "'; expected it once");
    }
    norms.push_back(nv);
  }
  if (pairs.empty() && norms.empty()) {
    throw CheckpointError(path, "holds no LoRA factors and no norms (" +
                                    std::to_string(set.size()) + " tensors); " + kTargetsHelp);
  }

  // Pairs: both factors, shapes A [r, in] and B [out, r], one rank.
  int rank = 0;
  std::string rank_from;
  for (auto& [key, pv] : pairs) {
    if (!pv.a || !pv.b) {
      const io::TensorView* have = pv.a ? pv.a : pv.b;
      throw CheckpointError(path, "tensor '" + have->name + "' is the LoRA factor " +
                                      (pv.a ? "A" : "B") + " of " + pv.official +
                                      ", but its factor " + (pv.a ? "B" : "A") +
                                      " is missing; expected both (the file is incomplete)");
    }
    const std::unique_ptr<model::Linear> model::LayerWeights::*slot =
        model::kLoraTargetSlots[key.second];
    const LayerSpec* ls = nullptr;
    for (const LayerSpec& s : model::layer_tensors())
      if (s.lin == slot) ls = &s;
    const int64_t out = model::dim_value(ls->rows, g), in = model::dim_value(ls->cols, g);
    const io::TensorView& A = *pv.a;
    const io::TensorView& B = *pv.b;
    if (A.shape.size() != 2 || A.shape[0] < 1 || A.shape[1] != in) {
      throw CheckpointError(
          path, "tensor '" + A.name + "' (LoRA A of " + pv.official + "): expected shape [r, " +
                    std::to_string(in) +
                    "] (r >= 1, in = " + std::string(model::dim_letter(ls->cols)) + "), found " +
                    A.shape_string() + "; the adapter was trained for another model");
    }
    const int64_t r = A.shape[0];
    if (B.shape.size() != 2 || B.shape[0] != out || B.shape[1] != r) {
      throw CheckpointError(
          path, "tensor '" + B.name + "' (LoRA B of " + pv.official + "): expected shape [" +
                    std::to_string(out) + ", " + std::to_string(r) +
                    "] (out = " + std::string(model::dim_letter(ls->rows)) + ", r from its A " +
                    A.shape_string() + "), found " + B.shape_string() +
                    (B.shape.size() == 2 && B.shape[0] == out
                         ? "; A and B must have the same rank"
                         : "; the adapter was trained for another model"));
    }
    if (r > std::max(in, out)) {
      throw CheckpointError(path, "tensor '" + A.name + "': rank " + std::to_string(r) +
                                      " exceeds the matrix size " + std::to_string(out) + " x " +
                                      std::to_string(in) + "; expected r <= max(out, in)");
    }
    if (rank == 0) {
      rank = static_cast<int>(r);
      rank_from = A.name;
    } else if (r != rank) {
      throw CheckpointError(path, "tensor '" + A.name + "' has rank " + std::to_string(r) +
                                      " but '" + rank_from + "' has rank " + std::to_string(rank) +
                                      "; expected one rank for every adapted matrix (alpha / r "
                                      "is one scale)");
    }
  }

  // Metadata and alpha.
  const auto& meta = set.metadata();
  auto meta_of = [&](const std::string& k) -> const std::string* {
    auto it = meta.find(k);
    return it == meta.end() ? nullptr : &it->second;
  };
  if (const std::string* v = meta_of("wick.lora"); v && *v != "1") {
    throw CheckpointError(path, "metadata wick.lora = '" + *v +
                                    "': expected '1' (the only adapter format version this wick "
                                    "reads); upgrade wick");
  }
  if (const std::string* v = meta_of("lora_rank")) {
    auto r = parse_decimal(*v);
    if (!r || (!pairs.empty() && *r != rank)) {
      throw CheckpointError(path, "metadata lora_rank = '" + *v + "' but the factors have rank " +
                                      std::to_string(rank) +
                                      "; expected them to agree (the file is inconsistent)");
    }
  }
  std::optional<double> file_alpha;
  if (const std::string* v = meta_of("lora_alpha")) {
    file_alpha = parse_decimal(*v);
    if (!file_alpha || !std::isfinite(*file_alpha) || *file_alpha <= 0) {
      throw CheckpointError(
          path, "metadata lora_alpha = '" + *v + "': expected a finite decimal number > 0");
    }
  }
  if (options.alpha && (!std::isfinite(*options.alpha) || *options.alpha <= 0))
    throw InputError("LoRA alpha " + num(*options.alpha) + " for " + path +
                     ": expected a finite number > 0 (the trainer's lora_alpha)");
  if (!std::isfinite(options.scale))
    throw InputError("LoRA scale " + num(options.scale) + " for " + path +
                     ": expected a finite number (1 = as trained)");
  double alpha = 0;
  if (file_alpha && options.alpha && *file_alpha != *options.alpha) {
    throw InputError("LoRA alpha " + num(*options.alpha) + " contradicts the adapter " + path +
                     ", which was written with lora_alpha = " + num(*file_alpha) +
                     "; drop --lora-alpha (the file's value is used) or give " + num(*file_alpha));
  }
  if (file_alpha) {
    alpha = *file_alpha;
  } else if (options.alpha) {
    alpha = *options.alpha;
  } else if (!pairs.empty()) {
    throw InputError("the LoRA adapter " + path +
                     " does not store its alpha (RWKV-PEFT and rwkv-metal files never do) and "
                     "none was given; pass the alpha it was trained with (--lora-alpha A, "
                     "RWKV-PEFT's --lora_alpha; scale = alpha / rank = alpha / " +
                     std::to_string(rank) + ")");
  }

  // Values: dtypes, finiteness; then the fp32 copies.
  auto impl = std::make_shared<Impl>();
  impl->source = path;
  impl->alpha = alpha;
  impl->lora_scale = options.scale;
  impl->scale = rank > 0 ? alpha / rank * options.scale : 0.0;
  check_applied_scale(impl->scale, path);
  auto weights = std::make_shared<model::LoraWeights>();
  model::LoraWeights& w = *weights;
  w.geometry = g;
  w.rank = rank;
  w.layers.resize(static_cast<size_t>(g.n_layer));
  base::Sha256 h;
  const char zero = 0;
  h.update("wick-lora-adapter-v1").update(&zero, 1);
  for (auto& [key, pv] : pairs) {
    check_dtype_and_values(path, *pv.a);
    check_dtype_and_values(path, *pv.b);
    model::LoraPair& p = w.layers[static_cast<size_t>(key.first)].pairs[key.second];
    std::vector<float> a = io::to_f32(*pv.a), b = io::to_f32(*pv.b);
    h.update(pv.official).update(&zero, 1);
    h.update(a.data(), a.size() * 4).update(b.data(), b.size() * 4);
    impl->parameters += a.size() + b.size();
    p.down = model::DenseLinear::owned_f32(std::move(a), pv.a->shape[0], pv.a->shape[1]);
    p.up = model::DenseLinear::owned_f32(std::move(b), pv.b->shape[0], pv.b->shape[1]);
  }
  // Table order of the adapted and replaced names.
  for (int64_t l = 0; l < g.n_layer; ++l)
    for (const LayerSpec& s : model::layer_tensors()) {
      const int t = target_index(s);
      if (t >= 0 && w.layers[static_cast<size_t>(l)].pairs[t].down)
        impl->adapted.push_back("blocks." + std::to_string(l) + "." + std::string(s.name));
    }
  std::sort(norms.begin(), norms.end(), [](const NormViews& x, const NormViews& y) {
    return std::make_pair(x.layer, x.official) < std::make_pair(y.layer, y.official);
  });
  for (const NormViews& nv : norms) {
    check_dtype_and_values(path, *nv.view);
    std::vector<float> v = io::to_f32(*nv.view);
    h.update(nv.official).update(&zero, 1).update(v.data(), v.size() * 4);
    impl->parameters += v.size();
    impl->replaced.push_back(nv.official);
    if (nv.layer >= 0)
      w.layers[static_cast<size_t>(nv.layer)].norms.*nv.layer_member = std::move(v);
    else
      w.norms.*nv.model_member = std::move(v);
  }
  impl->content_digest = h.hex_digest();
  impl->fingerprint = scaled_fingerprint(impl->content_digest, impl->scale);
  impl->weights = std::move(weights);
  return std::make_shared<const LoraAdapter>(std::move(impl));
}

std::shared_ptr<const LoraAdapter> LoraAdapter::with_scale(double lora_scale) const {
  if (!std::isfinite(lora_scale))
    throw InputError("LoRA scale " + num(lora_scale) + " for " + impl_->source +
                     ": expected a finite number (1 = as trained)");
  auto impl = std::make_shared<Impl>(*impl_);
  impl->lora_scale = lora_scale;
  impl->scale = impl->weights->rank > 0 ? impl->alpha / impl->weights->rank * lora_scale : 0.0;
  check_applied_scale(impl->scale, impl->source);
  impl->fingerprint = scaled_fingerprint(impl->content_digest, impl->scale);
  return std::make_shared<const LoraAdapter>(std::move(impl));
}

const std::string& LoraAdapter::source() const {
  return impl_->source;
}
int LoraAdapter::rank() const {
  return impl_->weights->rank;
}
double LoraAdapter::alpha() const {
  return impl_->alpha;
}
double LoraAdapter::lora_scale() const {
  return impl_->lora_scale;
}
double LoraAdapter::scale() const {
  return impl_->scale;
}
const std::vector<std::string>& LoraAdapter::adapted() const {
  return impl_->adapted;
}
const std::vector<std::string>& LoraAdapter::replaced() const {
  return impl_->replaced;
}
uint64_t LoraAdapter::parameters() const {
  return impl_->parameters;
}
uint64_t LoraAdapter::bytes() const {
  return impl_->parameters * sizeof(float);
}
const std::string& LoraAdapter::fingerprint() const {
  return impl_->fingerprint;
}
const Geometry& LoraAdapter::geometry() const {
  return impl_->weights->geometry;
}
std::string LoraAdapter::describe() const {
  return fmt::format("{} (rank {}, alpha {}, scale {}, {} matrices, {} norms replaced)",
                     impl_->source, rank(), alpha(), scale(), adapted().size(), replaced().size());
}

namespace model {

void check_adapter_geometry(const LoraAdapter& a, const Geometry& g) {
  if (a.geometry() == g) return;
  const Geometry& x = a.geometry();
  throw InputError(fmt::format(
      "the LoRA adapter {} was loaded for a model of {} layers, width {}, FFN {}, vocabulary {}, "
      "but this model has {} layers, width {}, FFN {}, vocabulary {}; load the adapter against "
      "this model (LoraAdapter::load)",
      a.source(), x.n_layer, x.n_embd, x.ffn_dim, x.vocab, g.n_layer, g.n_embd, g.ffn_dim,
      g.vocab));
}

}  // namespace model

Model Model::with_adapter(std::shared_ptr<const LoraAdapter> adapter) const {
  Model m = *this;
  m.adapter_ = adapter;
  m.adapted_info_ = nullptr;
  if (!adapter) return m;
  model::check_adapter_geometry(*adapter, impl_->geometry);
  auto info = std::make_shared<ModelInfo>(impl_->info);
  info->adapter = adapter->describe();
  info->bytes_per_token += adapter->bytes();
  const char zero = 0;
  base::Sha256 h;
  h.update("wick-lora-v1").update(&zero, 1).update(impl_->info.fingerprint).update(&zero, 1);
  h.update(adapter->fingerprint());
  info->fingerprint = "sha256:" + h.hex_digest();
  m.adapted_info_ = std::move(info);
  return m;
}

}  // namespace wick
