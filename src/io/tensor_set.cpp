#include "io/tensor_set.h"

#include <cstring>

#include "base/fp16.h"
#include "base/strings.h"
#include "wick/errors.h"

namespace wick::io {

std::string TensorView::shape_string() const {
  return base::shape_string(shape);
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
        out[i] = v.dtype == DType::F16 ? base::f16_to_f32(h) : base::bf16_to_f32(h);
      }
      break;
    default:
      out.clear();
      break;
  }
  return out;
}

int64_t first_nonfinite(const void* data, DType dtype, int64_t n, bool* nan) {
  const auto* p = static_cast<const uint8_t*>(data);
  // An all-ones exponent is an infinity (zero mantissa) or a NaN.
  auto found = [nan](int64_t i, uint32_t mantissa) {
    if (nan) *nan = mantissa != 0;
    return i;
  };
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::F32) {
      uint32_t u;
      std::memcpy(&u, p + 4 * i, 4);
      if ((u & 0x7f800000u) == 0x7f800000u) return found(i, u & 0x007fffffu);
    } else if (dtype == DType::F16 || dtype == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      const uint16_t exp = dtype == DType::F16 ? 0x7c00 : 0x7f80;
      if ((h & exp) == exp) return found(i, h & static_cast<uint16_t>(~exp & 0x7fff));
    } else {
      return -1;
    }
  }
  return -1;
}

TensorSet strip_prefix(const TensorSet& set, const std::string& prefix) {
  TensorSet out(set.source());
  for (const TensorView& t : set.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    TensorView v = t;
    v.name = t.name.substr(prefix.size());
    out.add(std::move(v));
  }
  for (const auto& f : set.files()) out.keep_alive(f);
  out.metadata() = set.metadata();
  return out;
}

}  // namespace wick::io
