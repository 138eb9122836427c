// Projections stored in rwkv-quant's packed layouts (sb6, sym) behind the Linear interface of
// the weight-access path (model/linear.h). The codes stay in the memory-mapped `.rwkvq` file;
// apply() runs the kernels of kernels/qmatmul.h, which decode blocks of codes in registers, for
// the recurrent step (T = 1, GEMV) and the parallel pass (T > 1) alike, so both passes give the
// same bits (and so does apply_int8_inputs, Precision::kInt8). Small packed tensors (LoRA asym/rtn)
// are not handled here: the loader dequantises them once into dense fp32.
#pragma once

#include <memory>

#include "kernels/qmatmul.h"
#include "model/linear.h"
#include "quant/rwkvq.h"

namespace wick::model {

class PackedLinear final : public Linear {
 public:
  // `t` must be an sb6 or sym tensor [out, in] (nn.Linear orientation); `owner` keeps its
  // buffers alive. Throws CheckpointError for another layout.
  PackedLinear(const quant::QuantTensor& t, std::shared_ptr<const void> owner);

  int64_t out_features() const override { return rows_; }
  int64_t in_features() const override { return cols_; }
  void apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const override;
  // The integer product of the codes with the rounded inputs (kernels/qmatmul.h
  // qmatmul_int8_inputs, sb6 and sym); `scratch` is not used.
  void apply_int8_inputs(const kernels::Int8Inputs& x, float* scratch, float* y,
                         kernels::ThreadPool& pool) const override;
  DType stored_dtype() const override { return DType::U8; }
  uint64_t stored_bytes() const override { return bytes_; }
  quant::Layout layout() const { return layout_; }

 private:
  quant::Layout layout_;
  kernels::Sb6Matrix sb6_;
  kernels::SymMatrix sym_;
  int64_t rows_, cols_;
  uint64_t bytes_;
  std::shared_ptr<const void> owner_;
};

}  // namespace wick::model
