// A named set of tensors read from one checkpoint container, pointing into the container's bytes
// (no copies). Every reader (safetensors, PyTorch .pth) produces one; the name mapping and the
// model loader consume it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "wick/dtype.h"

namespace wick::io {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;     // row-major, outermost first
  const uint8_t* data = nullptr;  // little-endian elements; may be unaligned
  size_t nbytes = 0;              // == numel() * dtype_size(dtype), checked by the reader

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_string() const;  // base::shape_string(shape)
};

// The elements of a F32, F16 or BF16 tensor widened to fp32 (exactly); other dtypes give an empty
// vector (callers check the dtype first).
std::vector<float> to_f32(const TensorView& v);

// The index of the first NaN or infinite element among the `n` elements at `data` (F32, F16 or
// BF16, little-endian, any alignment), or -1 when every one is finite (and for other dtypes).
// `nan` (if given) tells whether that element is a NaN rather than an infinity.
int64_t first_nonfinite(const void* data, DType dtype, int64_t n, bool* nan = nullptr);
inline int64_t first_nonfinite(const TensorView& v, bool* nan = nullptr) {
  return first_nonfinite(v.data, v.dtype, v.numel(), nan);
}

class TensorSet {
 public:
  TensorSet() = default;
  explicit TensorSet(std::string source) : source_(std::move(source)) {}

  // Adds a tensor; throws FormatError on a duplicate name.
  void add(TensorView t);
  const TensorView* find(const std::string& name) const;
  const std::vector<TensorView>& tensors() const { return tensors_; }
  size_t size() const { return tensors_.size(); }

  // The file the tensors came from (for messages).
  const std::string& source() const { return source_; }
  // String metadata (safetensors `__metadata__`); empty for .pth.
  std::map<std::string, std::string>& metadata() { return metadata_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Keeps the mapped bytes alive as long as the views are used.
  void keep_alive(std::shared_ptr<MappedFile> f) { files_.push_back(std::move(f)); }
  const std::vector<std::shared_ptr<MappedFile>>& files() const { return files_; }

 private:
  std::string source_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::shared_ptr<MappedFile>> files_;
};

// The tensors of `set` whose names start with `prefix`, renamed without it; the views share the
// bytes and the mapped files are kept alive. Metadata is copied.
TensorSet strip_prefix(const TensorSet& set, const std::string& prefix);

}  // namespace wick::io
