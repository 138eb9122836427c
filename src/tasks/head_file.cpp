#include "tasks/head_file.h"

#include <charconv>

#include "io/checkpoint.h"
#include "io/mapped_file.h"
#include "wick/errors.h"

namespace wick::tasks {

io::TensorSet read_head_file(const std::string& path) {
  return io::read_tensor_file(io::MappedFile::open(path));  // the one container sniffing
}

const std::vector<int64_t>& head_shape(const io::TensorSet& set, const std::string& name) {
  const io::TensorView* t = set.find(name);
  if (!t) throw CheckpointError(set.source(), "missing tensor '" + name + "'");
  return t->shape;
}

namespace {

const io::TensorView& float_tensor(const io::TensorSet& set, const std::string& name,
                                   const std::string& what) {
  const io::TensorView* t = set.find(name);
  if (!t) {
    throw CheckpointError(set.source(), "missing tensor '" + name + "' (" + what +
                                            "); the head file is incomplete or of another format");
  }
  if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16) {
    throw CheckpointError(set.source(), "tensor '" + name + "' (" + what +
                                            "): expected dtype F32, F16 or BF16, found " +
                                            std::string(dtype_name(t->dtype)));
  }
  return *t;
}

}  // namespace

std::vector<float> head_vector(const io::TensorSet& set, const std::string& name, int64_t numel,
                               const std::string& what) {
  const io::TensorView& t = float_tensor(set, name, what);
  if (t.numel() != numel) {
    throw CheckpointError(set.source(), "tensor '" + name + "' (" + what + "): expected " +
                                            std::to_string(numel) + " elements, found shape " +
                                            t.shape_string());
  }
  return io::to_f32(t);
}

std::vector<float> head_matrix(const io::TensorSet& set, const std::string& name, int64_t rows,
                               int64_t cols, const std::string& what) {
  const io::TensorView& t = float_tensor(set, name, what);
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
    throw CheckpointError(set.source(), "tensor '" + name + "' (" + what + "): expected shape [" +
                                            std::to_string(rows) + ", " + std::to_string(cols) +
                                            "], found " + t.shape_string());
  }
  return io::to_f32(t);
}

std::optional<std::string> meta(const io::TensorSet& set, const std::string& key) {
  auto it = set.metadata().find(key);
  if (it == set.metadata().end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> meta_int(const io::TensorSet& set, const std::string& key) {
  std::optional<std::string> v = meta(set, key);
  if (!v || v->empty()) return std::nullopt;
  int64_t out = 0;
  const char* b = v->data();
  const char* e = b + v->size();
  auto res = std::from_chars(b, e, out);
  if (res.ec != std::errc() || res.ptr != e) {
    throw CheckpointError(set.source(),
                          "metadata '" + key + "': expected an integer, found '" + *v + "'");
  }
  return out;
}

}  // namespace wick::tasks
