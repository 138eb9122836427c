// merge_lora (wick/lora.h): a dense checkpoint with an adapter merged, W += scale·B·A in fp32,
// streamed to a safetensors file under the base's own tensor names.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "model/lora.h"
#include "model/naming.h"
#include "model/tensor_table.h"
#include "quant/rwkvq.h"
#include "wick/errors.h"
#include "wick/lora.h"

namespace wick {
namespace {

// What becomes of one stored tensor.
struct MergeAction {
  const model::LoraPair* pair = nullptr;            // merged: W + scale·B·A
  const std::vector<float>* replacement = nullptr;  // replaced by the adapter's norm
};

// Element `e` of a F32 / F16 / BF16 tensor.
float element(const io::TensorView& v, int64_t e) {
  if (v.dtype == DType::F32) {
    float f;
    std::memcpy(&f, v.data + 4 * e, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, v.data + 2 * e, 2);
  return v.dtype == DType::F16 ? base::f16_to_f32(h) : base::bf16_to_f32(h);
}

// Stores `f` as element `j` of `out` in `dtype` (round to nearest even for the 16-bit types).
void store(float f, DType dtype, char* out, int64_t j) {
  if (dtype == DType::F32) {
    std::memcpy(out + 4 * j, &f, 4);
    return;
  }
  const uint16_t h = dtype == DType::F16 ? base::f32_to_f16(f) : base::f32_to_bf16(f);
  std::memcpy(out + 2 * j, &h, 2);
}

const float* dense_f32(const model::DenseLinear& L) {
  return static_cast<const float*>(L.dense_matrix()->data);
}

}  // namespace

LoraMergeSummary merge_lora(const std::string& base_path, const LoraAdapter& adapter,
                            const std::string& out_path) {
  io::Checkpoint ck = io::open_checkpoint(base_path);
  const io::TensorSet& set = ck.tensors;
  if (quant::RwkvqFile::is_rwkvq(set)) {
    throw CheckpointError(base_path,
                          "is a packed .rwkvq model; merging a LoRA adapter needs the dense "
                          "weights (fp32/fp16/bf16). Merge into the dense checkpoint it was made "
                          "from, then quantise the merged file (wick quantize), or apply the "
                          "adapter at run time (--lora)");
  }
  // The base must be the model the adapter was checked against (geometry) and one wick loads.
  LoadOptions unpacked;  // only its geometry is read
  unpacked.pack_weights = false;
  const Model base = Model::load(base_path, unpacked);
  model::check_adapter_geometry(adapter, base.geometry());
  const model::OfficialNames names = model::map_to_official_names(set);

  const model::LoraWeights& w = *adapter.impl().weights;
  std::map<std::string, MergeAction> actions;  // stored name -> action
  size_t merged = 0, replaced = 0;
  auto stored_of = [&](const std::string& official) -> const model::MappedTensor* {
    auto it = names.tensors.find(official);
    return it == names.tensors.end() ? nullptr : &it->second;
  };
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    for (const model::LayerSpec& s : model::layer_tensors()) {
      const std::string official = prefix + std::string(s.name);
      const std::vector<float>* rep = nullptr;
      const model::LoraPair* pair = nullptr;
      if (s.role == model::Role::kNorm) {
        const std::vector<float>& v = w.layers[l].norms.*s.vec;
        if (!v.empty()) rep = &v;
      }
      for (int t = 0; t < model::kLoraTargets; ++t)
        if (s.lin == model::kLoraTargetSlots[t] && w.layers[l].pairs[t].down)
          pair = &w.layers[l].pairs[t];
      if (!rep && !pair) continue;
      const model::MappedTensor* m = stored_of(official);
      if (!m) {
        throw CheckpointError(base_path, "has no tensor '" + official + "', which the adapter " +
                                             adapter.source() + (pair ? " adapts" : " replaces") +
                                             "; expected the adapter's base model");
      }
      if (pair && m->view.dtype != DType::F32 && m->view.dtype != DType::F16 &&
          m->view.dtype != DType::BF16) {
        throw CheckpointError(base_path, "tensor '" + m->stored_name + "' is stored as " +
                                             std::string(dtype_name(m->view.dtype)) +
                                             "; merging needs fp32, fp16 or bf16 weights");
      }
      actions[m->stored_name] = MergeAction{pair, rep};
      (pair ? merged : replaced) += 1;
    }
  }
  for (const model::ModelSpec& s : model::model_tensors()) {
    if (s.role != model::Role::kNorm || (w.norms.*s.vec).empty()) continue;
    const model::MappedTensor* m = stored_of(std::string(s.name));
    if (!m) {
      throw CheckpointError(base_path, "has no tensor '" + std::string(s.name) +
                                           "', which the adapter " + adapter.source() +
                                           " replaces; expected the adapter's base model");
    }
    actions[m->stored_name] = MergeAction{nullptr, &(w.norms.*s.vec)};
    ++replaced;
  }

  std::vector<io::TensorSpec> specs;
  std::vector<const MergeAction*> plan;
  for (const io::TensorView& t : set.tensors()) {
    auto it = actions.find(t.name);
    const MergeAction* a = it == actions.end() ? nullptr : &it->second;
    // A replaced norm keeps the base's dtype and shape; a 16-bit or fp32 dtype is required.
    if (a && a->replacement &&
        (t.numel() != static_cast<int64_t>(a->replacement->size()) ||
         (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16))) {
      throw CheckpointError(base_path, "tensor '" + t.name + "' (" + t.shape_string() + ", " +
                                           std::string(dtype_name(t.dtype)) +
                                           ") cannot take the adapter's replacement of " +
                                           std::to_string(a->replacement->size()) +
                                           " values; expected an fp32/fp16/bf16 norm of that size");
    }
    specs.push_back(io::TensorSpec{t.name, t.dtype, t.shape});
    plan.push_back(a);
  }
  std::map<std::string, std::string> metadata = set.metadata();
  metadata["wick.lora_merged"] = adapter.describe();

  const float scale = model::applied_scale(adapter);
  std::vector<float> acc;
  int64_t acc_row = -1;
  size_t acc_tensor = static_cast<size_t>(-1);
  const io::TensorChunkFiller fill = [&](size_t index, uint64_t offset, std::span<char> out) {
    const io::TensorView& t = set.tensors()[index];
    const MergeAction* a = plan[index];
    const size_t es = dtype_size(t.dtype);
    const int64_t e0 = static_cast<int64_t>(offset / es);
    const int64_t n = static_cast<int64_t>(out.size() / es);
    if (!a) {
      std::memcpy(out.data(), t.data + offset, out.size());
      return;
    }
    if (a->replacement) {
      for (int64_t j = 0; j < n; ++j) store((*a->replacement)[e0 + j], t.dtype, out.data(), j);
      return;
    }
    const model::LoraPair& p = *a->pair;
    const int64_t r = p.down->out_features(), in = p.down->in_features();
    const float* A = dense_f32(*p.down);  // [r, in]
    const float* B = dense_f32(*p.up);    // [out, r]
    for (int64_t j = 0; j < n; ++j) {
      const int64_t e = e0 + j, o = e / in, i = e % in;
      if (o != acc_row || index != acc_tensor) {
        // (B·A)[o, :] summed over k = 0..r-1 in order, in fp32.
        acc.assign(static_cast<size_t>(in), 0.f);
        for (int64_t k = 0; k < r; ++k) {
          const float b = B[o * r + k];
          const float* arow = A + k * in;
          for (int64_t c = 0; c < in; ++c) acc[c] += b * arow[c];
        }
        acc_row = o;
        acc_tensor = index;
      }
      store(element(t, e) + scale * acc[i], t.dtype, out.data(), j);
    }
  };
  LoraMergeSummary summary;
  summary.file_bytes = io::write_safetensors_streaming(out_path, specs, metadata, fill);
  summary.tensors = specs.size();
  summary.merged = merged;
  summary.replaced = replaced;
  return summary;
}

}  // namespace wick
