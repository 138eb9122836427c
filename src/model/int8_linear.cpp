#include "model/int8_linear.h"

#include <string>

#include "base/sha256.h"
#include "io/mapped_file.h"
#include "model/model_impl.h"
#include "model/tensor_table.h"
#include "wick/errors.h"

namespace wick::model {

namespace {

// The set Linears of `w` that the tensor table's rows name, in table order; int8-marked rows only
// when `int8_only`.
std::vector<Int8Target> linears_of(ModelWeights& w, bool int8_only) {
  std::vector<Int8Target> out;
  auto add = [&out, int8_only]<class W>(std::span<const TensorSpec<W>> table,
                                        const std::string& prefix, W& weights) {
    for (const TensorSpec<W>& s : table)
      if (s.lin != nullptr && (s.int8 || !int8_only) && weights.*s.lin)
        out.push_back({prefix + std::string(s.name), &(weights.*s.lin)});
  };
  for (size_t i = 0; i < w.layers.size(); ++i)
    add(layer_tensors(), "blocks." + std::to_string(i) + ".", w.layers[i]);
  // RWKV-X attention blocks (docs/rwkvx.md): q/k/v/o projections and their channel mix.
  for (size_t j = 0; j < w.attention.size(); ++j)
    add(attention_tensors(), "moba." + std::to_string(j) + ".", w.attention[j]);
  add(model_tensors(), "", w);  // the head (absent in an embedding backbone)
  return out;
}

}  // namespace

std::vector<Int8Target> int8_targets(ModelWeights& w) {
  return linears_of(w, true);
}

std::vector<Int8Target> table_linears(ModelWeights& w) {
  return linears_of(w, false);
}

Int8Conversion quantize_weights_int8(
    ModelWeights& w, const std::string& source, kernels::ThreadPool& pool,
    const std::function<void(const void* data, size_t bytes)>& release) {
  const std::vector<Int8Target> targets = int8_targets(w);

  Int8Conversion c;
  std::vector<std::unique_ptr<Linear>> converted;
  converted.reserve(targets.size());
  for (const Int8Target& t : targets) {
    const Linear& dense = **t.slot;
    if (dense.dense_matrix() == nullptr) {
      throw CheckpointError(
          source, "cannot quantise '" + t.name + "' to int8: it is stored " +
                      (dynamic_cast<const Int8Linear*>(t.slot->get()) ? "as int8 already"
                                                                      : "packed (.rwkvq)") +
                      ", not as dense fp32/fp16/bf16 weights. A .rwkvq model is already "
                      "quantised: load it without --quantize int8 (LoadOptions::quantize = kNone)");
    }
    const kernels::MatrixRef& m = *dense.dense_matrix();
    if (m.cols > kernels::kInt8MaxCols) {
      throw CheckpointError(source, "cannot quantise '" + t.name + "' to int8: it has " +
                                        std::to_string(m.cols) + " in-features, more than the " +
                                        std::to_string(kernels::kInt8MaxCols) +
                                        " for which the int32 sum is exact; load it without "
                                        "--quantize int8");
    }
    kernels::Int8Weights q = kernels::quantize_matrix_int8(m, pool);
    if (q.first_nonfinite_row >= 0) {
      throw CheckpointError(source, "cannot quantise '" + t.name + "' to int8: row " +
                                        std::to_string(q.first_nonfinite_row) +
                                        " holds a non-finite weight (inf or NaN); the checkpoint "
                                        "is damaged, or load it without --quantize int8");
    }
    const uint64_t n = static_cast<uint64_t>(m.rows * m.cols);
    c.parameters += n;
    c.int8_bytes += q.bytes();
    c.step_bytes_before += dense.stored_bytes();
    if (!is_embedding_table(w, m.data)) {  // a head tied to the table: the table stays
      c.released_parameters[m.dtype] += n;
      c.released_bytes += dense.stored_bytes();
      if (release) release(m.data, dense.stored_bytes());
    }
    converted.push_back(std::make_unique<Int8Linear>(std::move(q)));
  }
  for (size_t i = 0; i < targets.size(); ++i) *targets[i].slot = std::move(converted[i]);
  return c;
}

void quantize_model_int8(Model::Impl& impl, kernels::ThreadPool& pool) {
  ModelInfo& info = impl.info;
  if (!info.packed_parameters.empty() || info.container.rfind("rwkvq", 0) == 0) {
    throw CheckpointError(info.source,
                          "is a quantised .rwkvq model (" + info.container +
                              "); --quantize int8 quantises dense fp32/fp16/bf16 checkpoints at "
                              "load. Load this file without --quantize int8, or quantise the "
                              "dense checkpoint it was made from");
  }
  const Int8Conversion c = quantize_weights_int8(
      impl.weights, info.source, pool, [&impl](const void* data, size_t bytes) {
        on_mapped_pages(impl, data, bytes, &io::MappedFile::release_pages);
      });
  // A head tied to the embedding is int8 codes now: the table is read a row at a time.
  advise_sparse_embedding(impl);
  info.weight_bytes = info.weight_bytes - c.released_bytes + c.int8_bytes;
  info.bytes_per_token = info.bytes_per_token - c.step_bytes_before + c.int8_bytes;
  std::vector<std::pair<DType, uint64_t>> dtypes;
  for (const auto& [dt, n] : info.dtype_parameters) {
    auto it = c.released_parameters.find(dt);
    const uint64_t left = n - (it == c.released_parameters.end() ? 0 : it->second);
    if (left > 0) dtypes.emplace_back(dt, left);
  }
  info.dtype_parameters = std::move(dtypes);
  info.packed_parameters.emplace_back(std::string(kInt8LayoutName), c.parameters);
  info.quantization = WeightQuantization::kInt8;
  const char zero = 0;
  base::Sha256 h;
  h.update("wick-int8-per-row-v2").update(&zero, 1).update(info.fingerprint);
  info.fingerprint = "sha256:" + h.hex_digest();
}

}  // namespace wick::model

namespace wick {

std::string_view weight_quantization_name(WeightQuantization q) {
  switch (q) {
    case WeightQuantization::kNone:
      return "none";
    case WeightQuantization::kInt8:
      return "int8";
  }
  return "?";
}

}  // namespace wick
