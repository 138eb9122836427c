#include "model/quant_linear.h"

#include "quant/dequant.h"
#include "wick/errors.h"

namespace wick::model {

PackedLinear::PackedLinear(const quant::QuantTensor& t, std::shared_ptr<const void> owner)
    : layout_(t.layout),
      rows_(t.rows()),
      cols_(t.cols()),
      bytes_(read_bytes(t)),
      owner_(std::move(owner)) {
  if (t.layout == quant::Layout::kSb6) {
    sb6_ = quant::sb6_matrix(t);
    sb6_scales_ = kernels::unpack_sb6_scales(sb6_);
    sb6_.sm = sb6_scales_.data();
  } else if (t.layout == quant::Layout::kSym) {
    sym_ = quant::sym_matrix(t);
  } else {
    throw CheckpointError(t.key, "a packed projection must be sb6 or sym, found " + t.describe());
  }
}

uint64_t PackedLinear::read_bytes(const quant::QuantTensor& t) {
  if (t.layout != quant::Layout::kSb6) return t.stored_bytes();
  const auto nbytes = [](const io::TensorView* v) -> uint64_t { return v ? v->nbytes : 0; };
  const auto unpacked = static_cast<uint64_t>(t.rows() * (t.cols() / 256) * 16) * sizeof(uint16_t);
  return t.stored_bytes() - nbytes(t.gw_qsqm) - nbytes(t.gw_d) - nbytes(t.gw_dm) + unpacked;
}

void PackedLinear::apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const {
  if (layout_ == quant::Layout::kSb6) {
    kernels::qmatmul(sb6_, x, T, y, pool);
  } else {
    kernels::qmatmul(sym_, x, T, y, pool);
  }
}

void PackedLinear::apply_int8_inputs(const kernels::Int8Inputs& x, float* /*scratch*/, float* y,
                                     kernels::ThreadPool& pool) const {
  if (layout_ == quant::Layout::kSb6) {
    kernels::Sb6Matrix w = sb6_;
    w.hb = high_bits();
    kernels::qmatmul_int8_inputs(w, x, y, pool);
  } else {
    kernels::SymMatrix w = sym_;
    w.hb = high_bits();
    kernels::qmatmul_int8_inputs(w, x, y, pool);
  }
}

const uint8_t* PackedLinear::high_bits() const {
  std::call_once(high_bits_once_, [this] {
    high_bits_ = layout_ == quant::Layout::kSb6 ? kernels::int8_high_bits(sb6_)
                                                : kernels::int8_high_bits(sym_);
  });
  return high_bits_.empty() ? nullptr : high_bits_.data();
}

}  // namespace wick::model
