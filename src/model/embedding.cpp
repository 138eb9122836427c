#include "model/embedding.h"

#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "quant/dequant.h"

namespace wick::model {

void DenseEmbedding::row(int64_t token, float* out) const {
  const size_t base = static_cast<size_t>(token) * static_cast<size_t>(cols_);
  switch (dtype_) {
    case DType::F32:
      std::memcpy(out, static_cast<const float*>(data_) + base, cols_ * sizeof(float));
      break;
    case DType::F16:
      for (int64_t c = 0; c < cols_; ++c)
        out[c] = base::f16_to_f32(static_cast<const uint16_t*>(data_)[base + c]);
      break;
    case DType::BF16:
      for (int64_t c = 0; c < cols_; ++c)
        out[c] = base::bf16_to_f32(static_cast<const uint16_t*>(data_)[base + c]);
      break;
    default:
      WICK_CHECK(false, "the loader only builds F32/F16/BF16 embedding tables");
  }
}

void PackedEmbedding::row(int64_t token, float* out) const {
  quant::dequantize_rows(t_, token, 1, out);
}

std::vector<ByteRange> PackedEmbedding::stored_ranges() const {
  std::vector<ByteRange> out;
  for (const io::TensorView* v : t_.buffers()) out.push_back({v->data, v->nbytes});
  return out;
}

}  // namespace wick::model
