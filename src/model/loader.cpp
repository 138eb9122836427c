// Model::load: picks the container reader, maps names, derives the geometry from shapes, checks
// every tensor, and builds the weights (model/weights.h).
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/sha256.h"
#include "io/checkpoint.h"
#include "io/json_limits.h"
#include "io/mapped_file.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "model/block_reader.h"
#include "model/geometry.h"
#include "model/int8_linear.h"
#include "model/model_impl.h"
#include "model/naming.h"
#include "model/panel_packing.h"
#include "model/tensor_reader.h"
#include "runtime/runtime_impl.h"
#include "wick/errors.h"
#include "wick/lora.h"

extern "C" {
extern const unsigned char wick_default_model_start[];
extern const unsigned char wick_default_model_end[];
}

namespace wick {
namespace model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct HfFlags {
  bool norm_first = true;  // layer 0 has pre_norm (ln0)
  bool norm_bias = true;   // LayerNorms have biases
  bool tie_embeddings = false;
};

// Validates an fla/HF config.json against the geometry read from the shapes (docs/naming.md §4).
HfFlags check_hf_config(const std::string& text, const std::string& cpath, const Geometry& g) {
  json c = io::parse_json_limited(text, cpath, "config.json", io::JsonLimits{8, 1 << 16});
  if (!c.is_object()) throw CheckpointError(cpath, "config.json: expected a JSON object");
  HfFlags f;
  auto str = [&](const char* k) {
    return c.contains(k) && c[k].is_string() ? c[k].get<std::string>() : "";
  };
  auto check_int = [&](const char* k, int64_t expected, const char* what) {
    if (!c.contains(k) || c[k].is_null()) return;
    if (!c[k].is_number_integer() || c[k].get<int64_t>() != expected) {
      throw CheckpointError(cpath, std::string("config.json: '") + k + "' is " +
                                       io::brief_json(c[k]) + " but the weights have " + what +
                                       " = " + std::to_string(expected) +
                                       "; the config does not belong to these weights");
    }
  };
  if (str("model_type") != "rwkv7") {
    throw CheckpointError(
        cpath,
        "config.json: expected model_type \"rwkv7\" (fla RWKV7ForCausalLM), found " +
            (c.contains("model_type") ? io::brief_json(c["model_type"]) : std::string("none")));
  }
  if (c.contains("attn") && !c["attn"].is_null()) {
    throw CheckpointError(cpath,
                          "config.json: 'attn' is set (a hybrid model with softmax-attention "
                          "layers); wick runs pure RWKV-7 x070 models");
  }
  if (c.contains("hidden_act") && str("hidden_act") != "sqrelu") {
    throw CheckpointError(cpath, "config.json: expected hidden_act \"sqrelu\", found " +
                                     io::brief_json(c["hidden_act"]));
  }
  if (c.contains("value_dim") && !c["value_dim"].is_null()) {
    const json& vd = c["value_dim"];
    bool ok = vd.is_number_integer() ? vd.get<int64_t>() == g.n_embd : vd.is_array();
    if (vd.is_array())
      for (const json& x : vd) ok = ok && x.is_number_integer() && x.get<int64_t>() == g.n_embd;
    if (!ok) {
      throw CheckpointError(cpath, "config.json: value_dim " + io::brief_json(vd) +
                                       " differs from hidden_size " + std::to_string(g.n_embd) +
                                       " (fla 'state expansion' is not x070)");
    }
  }
  check_int("vocab_size", g.vocab, "vocabulary V");
  check_int("hidden_size", g.n_embd, "width C");
  check_int("num_hidden_layers", g.n_layer, "layers L");
  check_int("head_dim", g.head_size, "head size N (from r_k)");
  check_int("intermediate_size", g.ffn_dim, "FFN width F");
  check_int("decay_low_rank_dim", g.lora_w, "decay LoRA rank");
  check_int("a_low_rank_dim", g.lora_a, "in-context-rate LoRA rank");
  check_int("gate_low_rank_dim", g.lora_g, "gate LoRA rank");
  if (g.lora_v > 0) check_int("v_low_rank_dim", g.lora_v, "value-residual LoRA rank");
  if (c.contains("norm_eps") && c["norm_eps"].is_number() &&
      std::abs(c["norm_eps"].get<double>() - 1e-5) > 1e-12) {
    throw CheckpointError(cpath, "config.json: norm_eps " + io::brief_json(c["norm_eps"]) +
                                     " is not the x070 LayerNorm eps 1e-5");
  }
  if (c.contains("norm_first") && c["norm_first"].is_boolean())
    f.norm_first = c["norm_first"].get<bool>();
  if (c.contains("norm_bias") && c["norm_bias"].is_boolean())
    f.norm_bias = c["norm_bias"].get<bool>();
  if (c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean())
    f.tie_embeddings = c["tie_word_embeddings"].get<bool>();
  return f;
}

uint64_t total_file_bytes(const io::TensorSet& s) {
  uint64_t b = 0;
  for (const auto& f : s.files()) b += f->size();
  return b;
}

// The tensors of an .rwkvq as the loader sees them: every manifest key with its logical shape;
// dense records point at their buffer, packed ones carry no bytes (the TensorReader reads them
// through the RwkvqFile). An RWKV-X file's view goes to build_rwkvx like a dense one.
io::TensorSet logical_tensors(const quant::RwkvqFile& f) {
  io::TensorSet set(f.path());
  for (const quant::QuantTensor& q : f.tensors()) {
    io::TensorView v;
    v.name = q.key;
    v.shape = q.shape;
    if (q.layout == quant::Layout::kDense) {
      v.dtype = q.dense->dtype;
      v.data = q.dense->data;
      v.nbytes = q.dense->nbytes;
    } else {
      v.dtype = DType::F32;  // what it dequantises to
    }
    set.add(std::move(v));
  }
  for (const auto& file : f.buffers().files()) set.keep_alive(file);
  // The source checkpoint's metadata that `wick quantize` carried over (RWKV-X block counts and
  // attention defaults), without the manifest itself.
  for (const auto& [key, value] : f.buffers().metadata())
    if (key != "rwkvq") set.metadata()[key] = value;
  return set;
}

// The base fingerprint of docs/tasks.md §3.5: SHA-256 over every tensor in lexicographic order of
// its official name - name, 0x00, dtype tag, 0x00, shape "d0,d1,...", 0x00, and the stored bytes
// of tensors of at most 65536 elements (norms, mixes, biases, LoRA vectors). Cheap (no hashing of
// the large matrices) and changed by any change of names, shapes, dtypes or small tensors.
// A packed .rwkvq tensor is tagged "rwkvq:<layout>@<bits>" instead of a dtype, and its small
// tensors contribute their dequantised fp32 bytes.
std::string weights_fingerprint(const TensorReader& r) {
  base::Sha256 h;
  r.hash_records(h);
  return "sha256:" + h.hex_digest();
}

}  // namespace

std::shared_ptr<Model::Impl> build_model(io::TensorSet tensors, const std::string& hf_config,
                                         const std::string& config_path,
                                         const quant::RwkvqFile* packed,
                                         const BuildOptions& options) {
  const std::string path = tensors.source();
  TensorReader r(model::map_to_official_names(tensors), path, "a complete RWKV-7 x070 checkpoint",
                 packed, options.packed_prefix);
  auto impl = std::make_shared<Model::Impl>();
  Geometry& g = impl->geometry;
  g = model::derive_geometry(r.names(), path);

  HfFlags flags;
  if (!hf_config.empty()) flags = check_hf_config(hf_config, config_path, g);

  model::ModelWeights& w = impl->weights;
  if (!flags.norm_first && r.has("blocks.0.ln0.weight")) {
    throw CheckpointError(config_path,
                          "config.json says norm_first = false (no pre_norm), but the "
                          "weights contain '" +
                              r.names().tensors.at("blocks.0.ln0.weight").stored_name +
                              "'; the config does not belong to these weights");
  }
  const NormFlags norms{flags.norm_bias, flags.norm_first};
  read_block(r, model_tensors(), "", g, norms, -1, w);
  w.layers.resize(g.n_layer);
  for (int i = 0; i < g.n_layer; ++i) {
    read_block(r, layer_tensors(), "blocks." + std::to_string(i) + ".", g, norms, i, w.layers[i]);
    w.order.push_back(BlockRef{false, i});
  }
  if (!r.has("head.weight") && flags.tie_embeddings) {
    w.head = r.linear_of(r.matrix("emb.weight", g.vocab, g.n_embd, "V x C"), g.vocab, g.n_embd);
  } else if (!r.has("head.weight") && !options.require_head) {
    w.head = nullptr;  // a backbone without LM head (embedding model, reranker head stack)
  } else {
    w.head = r.linear("head.weight", g.vocab, g.n_embd, "V x C");
  }

  r.refuse_leftovers(
      "wick runs plain RWKV-7 x070 checkpoints, and unknown tensors mean another "
      "architecture (RWKV-7a/7b, DeepEmbed, a hybrid) or a damaged conversion");

  ModelInfo& info = impl->info;
  info.source = path;
  info.convention = r.names().convention;
  info.file_bytes = total_file_bytes(tensors);
  r.tally(info);
  info.fingerprint = weights_fingerprint(r);
  // One decode step reads one embedding row and every Linear once.
  uint64_t step_bytes =
      linear_bytes(model_tensors(), w) + w.emb->stored_bytes() / static_cast<uint64_t>(g.vocab);
  for (const LayerWeights& L : w.layers) step_bytes += linear_bytes(layer_tensors(), L);
  info.bytes_per_token = step_bytes;
  impl->sources.push_back(std::move(tensors));
  // The file's pages of what the model holds as copies (LoRA factors) are not read again.
  for (const ByteRange& c : r.copied())
    on_mapped_pages(*impl, c.data, c.bytes, &io::MappedFile::release_pages);
  return impl;
}

Model model_from_tensors(io::TensorSet tensors, const BuildOptions& options) {
  const std::string source = tensors.source();
  auto impl = build_model(std::move(tensors), "", "", nullptr, options);
  impl->info.source = source;
  return Model::from_impl(std::move(impl));
}

// An EmbeddingRWKV checkpoint (docs/tasks.md §6.3): `rwkv.` + an x070 state dict without LM head,
// plus task heads `head.{cls,sts,retr}_head.*` (read by the embedder, not part of the backbone).
// An `rwkv.*` file with an LM head is not one (an RWKV-X file without attention blocks, say): it
// goes to the ordinary loader, which names the prefixed tensors it does not know.
bool is_embedding_rwkv(const io::TensorSet& set) {
  return set.find("rwkv.emb.weight") != nullptr && set.find("rwkv.head.weight") == nullptr;
}

io::TensorSet embedding_rwkv_backbone(const io::TensorSet& set) {
  io::TensorSet out = io::strip_prefix(set, "rwkv.");
  for (const io::TensorView& t : set.tensors()) {
    if (t.name.rfind("rwkv.", 0) == 0) continue;
    if (t.name.rfind("vit.", 0) == 0 || t.name.rfind("proj.", 0) == 0) {
      throw CheckpointError(set.source(),
                            "holds an EmbeddingRWKV vision tower ('" + t.name +
                                "', SigLIP2 vit.* / proj.*), which wick does not support; use "
                                "a text-only EmbeddingRWKV checkpoint");
    }
    bool task_head = false;
    for (const char* h : {"head.cls_head.", "head.sts_head.", "head.retr_head."})
      if (t.name.rfind(h, 0) == 0) task_head = true;
    if (!task_head) out.add(t);  // reported as an unknown tensor by the loader
  }
  return out;
}

}  // namespace model

namespace {

// Model::load without LoadOptions: the built weights, before they are wrapped (and shared).
std::shared_ptr<Model::Impl> load_impl(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::path(path).extension() == ".rwkvq" && !fs::is_directory(path, ec)) {
    auto mapped = io::MappedFile::open(path);
    if (quant::RwkvqFile::is_zip(*mapped))
      quant::RwkvqFile::open(mapped);  // the legacy-pickle message
  }
  io::Checkpoint ck = io::open_checkpoint(path);
  io::TensorSet& set = ck.tensors;
  std::shared_ptr<Model::Impl> impl;
  if (quant::RwkvqFile::is_rwkvq(set)) {
    const quant::RwkvqFile packed = quant::RwkvqFile::from_tensor_set(std::move(set));
    io::TensorSet logical = model::logical_tensors(packed);
    impl = model::is_rwkvx(logical) ? model::build_rwkvx(std::move(logical), &packed)
                                    : model::build_model(std::move(logical), "", "", &packed);
    impl->info.container = "rwkvq v" + std::to_string(packed.manifest().format_version);
  } else if (model::is_rwkvx(set)) {
    impl = model::build_rwkvx(std::move(set));
    impl->info.container = ck.container;
  } else if (model::is_embedding_rwkv(set)) {
    model::BuildOptions options;
    options.require_head = false;
    impl = model::build_model(model::embedding_rwkv_backbone(set), "", "", nullptr, options);
    impl->info.container = ck.container + " (EmbeddingRWKV)";
    impl->info.embedding_rwkv = true;
  } else if (set.find("reranker.blocks.0.att.r_k") != nullptr) {
    throw CheckpointError(path,
                          "is an EmbeddingRWKV reranker head (reranker.*), not a language "
                          "model; load its embedding model as the model and pass this file "
                          "as the reranker head (wick rerank --model EMB.pth --head " +
                              path + ")");
  } else {
    // An fla-named file with a config.json beside it: validate against it as well.
    if (ck.config_text.empty() && set.find("model.embeddings.weight") != nullptr) {
      const fs::path beside = fs::path(path).parent_path() / "config.json";
      if (fs::exists(beside, ec)) {
        ck.config_path = beside.string();
        ck.config_text = io::read_text_file(ck.config_path);
      }
    }
    impl = model::build_model(std::move(set), ck.config_text, ck.config_path);
    impl->info.container = ck.container;
  }
  impl->info.source = path;
  // A step reads one row of the embedding: its pages come in one base page at a time, not in the
  // huge pages the rest of the mapping is advised for (README: "The embedding table read a row at
  // a time").
  model::advise_sparse_embedding(*impl);
  return impl;
}

std::shared_ptr<Model::Impl> load_default_impl() {
  const size_t n = static_cast<size_t>(wick_default_model_end - wick_default_model_start);
  auto mapped = io::MappedFile::borrow(wick_default_model_start, n,
                                       "<embedded default model tiny-rwkv7-834K.safetensors>");
  auto impl = model::build_model(io::read_safetensors(mapped), "", "");
  impl->info.container = "safetensors (embedded)";
  return impl;
}

// LoadOptions run on the built weights before they are shared, on the Runtime the Model gets.
Model with_load_options(std::shared_ptr<Model::Impl> impl, const LoadOptions& options) {
  auto runtime = std::make_shared<Runtime>();
  {
    RuntimeLease lease(*runtime);
    if (options.quantize == WeightQuantization::kInt8)
      model::quantize_model_int8(*impl, lease.pool());
    // What stays dense and row-major is packed into panels (model/panel_packing.h).
    if (options.pack_weights) model::pack_model_panels(*impl, options.precision, lease.pool());
  }
  Model m =
      Model::from_impl(std::move(impl)).with_runtime(runtime).with_precision(options.precision);
  if (options.lora.empty()) return m;
  return m.with_adapter(
      LoraAdapter::load(options.lora, m, LoraOptions{options.lora_alpha, options.lora_scale}));
}

}  // namespace

Model Model::load(const std::string& path) {
  return with_load_options(load_impl(path), LoadOptions{});
}
Model Model::load(const std::string& path, const LoadOptions& options) {
  return with_load_options(load_impl(path), options);
}
Model Model::load_default() {
  return with_load_options(load_default_impl(), LoadOptions{});
}
Model Model::load_default(const LoadOptions& options) {
  return with_load_options(load_default_impl(), options);
}

}  // namespace wick
