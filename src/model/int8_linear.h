// INT8 weights quantised at load time (LoadOptions::quantize = kInt8, `--quantize int8`): a
// Linear holding per-row symmetric int8 codes and fp32 scales, with the weight outlier columns
// kept in fp32 and the input outlier columns of every call added in fp32 (kernels/int8_matmul.h
// has the rule and the product), and the conversion of a loaded model's eligible matrices to it.
//
// Which matrices are converted is decided in one place, int8_targets(): per RWKV block the
// time-mix projections (receptance, key, value, output) and the channel-mix key and value, per
// RWKV-X attention block its query/key/value/output projections and channel-mix key and value,
// and the head.
// The embedding (a gather, not a product), the LoRA branches and every vector keep their stored
// dtype (dense LoRA factors are packed into panels at load like the rest: model/panel_packing.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/int8_matmul.h"
#include "model/linear.h"
#include "model/weights.h"
#include "wick/model.h"

namespace wick::model {

class Int8Linear final : public Linear {
 public:
  explicit Int8Linear(kernels::Int8Weights q) : q_(std::move(q)), view_(q_.view()) {}
  Int8Linear(const Int8Linear&) = delete;
  Int8Linear& operator=(const Int8Linear&) = delete;

  int64_t out_features() const override { return q_.rows; }
  int64_t in_features() const override { return q_.cols; }
  // Quantises each row of X on its own (so a T-row call equals T one-row calls bit for bit), then
  // the exact integer product of kernels/int8_matmul.h.
  void apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const override {
    kernels::int8_matmul(view_, x, T, y, pool);
  }
  DType stored_dtype() const override { return DType::I8; }
  // Bytes held in memory: the codes (rows padded to kernels::kInt8ColumnAlign) + fp32 scales +
  // the weight outlier columns (int32 indices, fp32 weights).
  uint64_t stored_bytes() const override { return q_.bytes(); }
  const kernels::Int8Weights& weights() const { return q_; }

 private:
  kernels::Int8Weights q_;
  kernels::Int8Matrix view_;
};

// One matrix of the tensor table (one int8 quantisation covers, for int8_targets()): its world
// name (docs/naming.md, for messages) and the slot holding its Linear.
struct Int8Target {
  std::string name;
  std::unique_ptr<Linear>* slot;
};

// The covered matrices of `w`: the rows of the tensor table (model/tensor_table.h) marked `int8`,
// in table order - for every RWKV block blocks.N.att.{receptance,key,value,output}.weight and
// blocks.N.ffn.{key,value}.weight, then for every RWKV-X attention block moba.J.att.{receptance
// (the query),key,value,output}.weight and moba.J.ffn.{key,value}.weight, then head.weight
// (absent without LM head). To cover more matrices, mark their rows in the table.
std::vector<Int8Target> int8_targets(ModelWeights& w);
// Every Linear of `w` the tensor table names, in table order: int8_targets() and, per RWKV block,
// the time mix's LoRA factors (blocks.N.att.{w,a,v,g}{1,2}; no v1/v2 in block 0).
std::vector<Int8Target> table_linears(ModelWeights& w);

// What quantize_weights_int8 changed, for ModelInfo.
struct Int8Conversion {
  uint64_t parameters = 0;  // weights now held as int8 codes
  uint64_t int8_bytes = 0;  // their codes + scales
  // Dense storage no longer used, per stored dtype (parameters) and in bytes. A head tied to the
  // embedding is not in these: the table is still read by the embedding gather.
  std::map<DType, uint64_t> released_parameters;
  uint64_t released_bytes = 0;
  // Bytes one recurrent step read from the converted matrices before (all of them, tied head
  // included) - replaced by int8_bytes in ModelInfo::bytes_per_token.
  uint64_t step_bytes_before = 0;
};

// Replaces every int8_targets() matrix of `w` by an Int8Linear quantised from its dense weights
// (fp32, fp16 or bf16, widened exactly). All or nothing: `w` is unchanged when it throws.
// Throws CheckpointError(source, ...) when a covered matrix is not dense (a packed .rwkvq model
// is already quantised) or holds a non-finite weight, or its in-features exceed
// kernels::kInt8MaxCols. Runs the row quantisation on the kernel thread pool. `release`, when
// given, is called with each converted matrix's dense bytes (data, size) right after it is
// quantised, except a head tied to the embedding: the caller may drop their pages from memory
// (they are not read again once the conversion completes, and must stay readable until then).
Int8Conversion quantize_weights_int8(
    ModelWeights& w, const std::string& source, kernels::ThreadPool& pool,
    const std::function<void(const void* data, size_t bytes)>& release = {});

// Converts a freshly built model (before it is shared) and updates its ModelInfo: weight_bytes
// and bytes_per_token count the int8 codes and scales instead of the replaced dense bytes;
// dtype_parameters drop the replaced parameters; packed_parameters gains
// {kInt8LayoutName, parameters}; quantization = kInt8; fingerprint becomes
// "sha256:" + SHA-256("wick-int8-per-row-v2" 0x00 <dense fingerprint>). Throws like
// quantize_weights_int8, and CheckpointError for a model loaded from a .rwkvq file.
// Rows are quantised on `pool`. The pages of the mapped file that held each converted matrix
// are given back as soon as it is quantised (io::MappedFile::release_pages), so the resident
// memory after load is the int8 codes plus what stays dense, not the dense file on top.
void quantize_model_int8(Model::Impl& impl, kernels::ThreadPool& pool);

}  // namespace wick::model
