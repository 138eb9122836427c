// Projections stored in rwkv-quant's packed layouts (sb6, sym) behind the Linear interface of
// the weight-access path (model/linear.h). The codes stay in the memory-mapped `.rwkvq` file (the
// sb6 block scales are unpacked once, at construction, to fp16: kernels/qmatmul.h Sb6Matrix::sm);
// apply() runs the kernels of kernels/qmatmul.h, which decode blocks of codes in registers, for
// the recurrent step (T = 1, GEMV) and the parallel pass (T > 1) alike, so both passes give the
// same bits (and so does apply_int8_inputs, Precision::kInt8). Small packed tensors (LoRA asym/rtn)
// are not handled here: the loader dequantises them once into dense fp32.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "kernels/qmatmul.h"
#include "model/linear.h"
#include "quant/rwkvq.h"

namespace wick::model {

class PackedLinear final : public Linear {
 public:
  // `t` must be an sb6 or sym tensor [out, in] (nn.Linear orientation); `owner` keeps its
  // buffers alive. Throws CheckpointError for another layout.
  PackedLinear(const quant::QuantTensor& t, std::shared_ptr<const void> owner);
  PackedLinear(const PackedLinear&) = delete;  // the sb6 view points into sb6_scales_
  PackedLinear& operator=(const PackedLinear&) = delete;

  int64_t out_features() const override { return rows_; }
  int64_t in_features() const override { return cols_; }
  void apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const override;
  // The integer product of the codes with the rounded inputs (kernels/qmatmul.h
  // qmatmul_int8_inputs, sb6 and sym); `scratch` is not used.
  void apply_int8_inputs(const kernels::Int8Inputs& x, float* scratch, float* y,
                         kernels::ThreadPool& pool) const override;
  DType stored_dtype() const override { return DType::U8; }
  // read_bytes(t) of the tensor it was made from.
  uint64_t stored_bytes() const override { return bytes_; }
  // The bytes a product with `t` reads: its stored codes and scales, for sb6 with the unpacked
  // scales (kernels/qmatmul.h Sb6Matrix::sm) in place of the packed 6-bit fields and fp16 d, dm.
  // (Where the active integer GEMV reads the rearranged planes, Sb6Matrix::hb or SymMatrix::hb,
  // they replace the file's planes byte for byte.)
  static uint64_t read_bytes(const quant::QuantTensor& t);
  quant::Layout layout() const { return layout_; }

 private:
  quant::Layout layout_;
  kernels::Sb6Matrix sb6_;
  // sb6_.sm (32 bytes per superblock of 256 weights), made at load.
  std::vector<uint16_t> sb6_scales_;
  // The rearranged planes (Sb6Matrix::hb: 32 or 64 bytes per superblock at 5 or 6 bits;
  // SymMatrix::hb: 64 at 6 bits) where the active integer GEMV reads them, else null: made by the
  // first integer product, so that a model never run at Precision::kInt8 does not hold them.
  // Thread-safe (std::call_once).
  const uint8_t* high_bits() const;
  mutable std::once_flag high_bits_once_;
  mutable std::vector<uint8_t> high_bits_;
  kernels::SymMatrix sym_;
  int64_t rows_, cols_;
  uint64_t bytes_;
  std::shared_ptr<const void> owner_;
};

}  // namespace wick::model
