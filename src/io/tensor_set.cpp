#include "io/tensor_set.h"

#include <cstring>

#include "kernels/dot.h"
#include "wick/errors.h"

namespace wick::io {

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void TensorSet::add(TensorView t) {
  if (index_.count(t.name)) {
    throw FormatError(source_, t.name, "each tensor name once", "a second tensor with this name");
  }
  index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
}

const TensorView* TensorSet::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> to_f32(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  const size_t n = out.size();
  switch (v.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(out.data(), v.data, n * 4);
      break;
    case DType::F16:
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, v.data + 2 * i, 2);
        out[i] = v.dtype == DType::F16 ? kernels::f16_to_f32(h) : kernels::bf16_to_f32(h);
      }
      break;
    default:
      out.clear();
      break;
  }
  return out;
}

}  // namespace wick::io
