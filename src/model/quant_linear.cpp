#include "model/quant_linear.h"

#include "wick/errors.h"

namespace wick::model {
namespace {
const uint8_t* bytes(const io::TensorView* v) {
  return v ? v->data : nullptr;
}
}  // namespace

PackedLinear::PackedLinear(const quant::QuantTensor& t, std::shared_ptr<const void> owner)
    : layout_(t.layout),
      rows_(t.rows()),
      cols_(t.cols()),
      bytes_(t.stored_bytes()),
      owner_(std::move(owner)) {
  if (t.layout == quant::Layout::kSb6) {
    sb6_ = kernels::Sb6Matrix{bytes(t.codes_packed),
                              bytes(t.gw_qh),
                              bytes(t.gw_qh2),
                              bytes(t.gw_qsqm),
                              bytes(t.gw_d),
                              bytes(t.gw_dm),
                              rows_,
                              cols_,
                              t.bits};
  } else if (t.layout == quant::Layout::kSym) {
    sym_ = kernels::SymMatrix{reinterpret_cast<const int8_t*>(bytes(t.codes)),
                              bytes(t.codes_packed),
                              bytes(t.gw_qh),
                              bytes(t.gw_qh2),
                              reinterpret_cast<const int8_t*>(bytes(t.gw_qs)),
                              bytes(t.gw_d),
                              rows_,
                              cols_,
                              t.bits};
  } else {
    throw CheckpointError(t.key, "a packed projection must be sb6 or sym, found " + t.describe());
  }
}

void PackedLinear::apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const {
  if (layout_ == quant::Layout::kSb6) {
    kernels::qmatmul(sb6_, x, T, y, pool);
  } else {
    kernels::qmatmul(sym_, x, T, y, pool);
  }
}

}  // namespace wick::model
