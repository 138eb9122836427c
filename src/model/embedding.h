// The embedding table behind one interface: the passes ask for the fp32 row of a token and never
// see how it is stored. Dense tables (fp32/fp16/bf16) are read in place from the mapped file;
// packed `.rwkvq` tables (sym, sb6) are dequantised one row per token from their codes (a
// gather: docs/rwkvq-format.md §2.3 "Embedding row gather"), bit-identical to dequantising the
// whole table, which is never done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "quant/rwkvq.h"
#include "wick/dtype.h"

namespace wick::model {

// Bytes of a table as stored (in a mapped file, or in memory the table owns): a view, valid while
// the table lives.
struct ByteRange {
  const void* data = nullptr;
  size_t bytes = 0;
};

class Embedding {
 public:
  virtual ~Embedding() = default;
  // out[C] = row `token` of the table as fp32. token must be in [0, V) (checked by the caller).
  virtual void row(int64_t token, float* out) const = 0;
  virtual uint64_t stored_bytes() const = 0;
  // Where the table's bytes are: one range for a dense table, one per buffer for a packed one. A
  // step reads one row's share of each.
  virtual std::vector<ByteRange> stored_ranges() const = 0;
};

// [V, C] dense table; `data` must stay valid while `owner` lives.
class DenseEmbedding final : public Embedding {
 public:
  DenseEmbedding(const void* data, DType dtype, int64_t cols, uint64_t rows,
                 std::shared_ptr<const void> owner)
      : data_(data), dtype_(dtype), cols_(cols), rows_(rows), owner_(std::move(owner)) {}
  void row(int64_t token, float* out) const override;
  uint64_t stored_bytes() const override { return rows_ * cols_ * dtype_size(dtype_); }
  std::vector<ByteRange> stored_ranges() const override {
    return {{data_, static_cast<size_t>(stored_bytes())}};
  }
  // The table's bytes (a head tied to the embedding borrows the same ones).
  const void* data() const { return data_; }

 private:
  const void* data_;
  DType dtype_;
  int64_t cols_;
  uint64_t rows_;
  std::shared_ptr<const void> owner_;
};

// A packed table read row by row through the exact dequantiser. `owner` keeps the buffers alive.
class PackedEmbedding final : public Embedding {
 public:
  PackedEmbedding(const quant::QuantTensor& t, std::shared_ptr<const void> owner)
      : t_(t), owner_(std::move(owner)) {}
  void row(int64_t token, float* out) const override;
  uint64_t stored_bytes() const override { return t_.stored_bytes(); }
  std::vector<ByteRange> stored_ranges() const override;

 private:
  quant::QuantTensor t_;  // views into the buffers `owner_` keeps alive
  std::shared_ptr<const void> owner_;
};

}  // namespace wick::model
