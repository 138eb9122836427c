#include "io/tensor_set.h"

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

}  // namespace wick::io
