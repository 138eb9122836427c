// TensorReader (model/tensor_reader.h), and the finite-weights check and the fingerprint record
// of model/model_impl.h that it is built on.
#include "model/tensor_reader.h"

#include <cstring>

#include "io/tensor_set.h"
#include "model/geometry.h"
#include "model/model_impl.h"
#include "model/quant_linear.h"
#include "quant/dequant.h"
#include "wick/errors.h"

namespace wick::model {
namespace {

// Tensors of at most this many elements contribute their bytes to the fingerprint.
constexpr int64_t kHashedElements = 65536;

std::string shape_csv(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s;
}

bool packed_projection(const quant::QuantTensor& q) {
  return q.layout == quant::Layout::kSb6 || q.layout == quant::Layout::kSym;
}

}  // namespace

void check_finite_weights(const std::string& path, const std::string& what, const void* data,
                          DType dtype, int64_t n) {
  bool nan = false;
  const int64_t i = io::first_nonfinite(data, dtype, n, &nan);
  if (i >= 0) {
    throw CheckpointError(path, "tensor " + what + " holds " + (nan ? "NaN" : "an infinity") +
                                    " at element " + std::to_string(i) +
                                    "; expected finite weights: the checkpoint is damaged "
                                    "(download or export it again)");
  }
}

void hash_tensor_record(base::Sha256& h, const std::string& name, const io::TensorView& t) {
  const char zero = 0;
  h.update(name).update(&zero, 1);
  h.update(dtype_name(t.dtype)).update(&zero, 1);
  h.update(shape_csv(t.shape)).update(&zero, 1);
  if (t.numel() <= kHashedElements) h.update(t.data, t.nbytes);
}

TensorReader::TensorReader(model::OfficialNames names, std::string path, std::string complete,
                           const quant::RwkvqFile* packed, const std::string& packed_prefix)
    : names_(std::move(names)),
      path_(std::move(path)),
      complete_(std::move(complete)),
      packed_file_(packed) {
  if (!packed_file_) return;
  for (const quant::QuantTensor& q : packed_file_->tensors()) {
    if (q.layout == quant::Layout::kDense || q.key.rfind(packed_prefix, 0) != 0) continue;
    packed_[q.key.substr(packed_prefix.size())] = &q;
  }
}

const quant::QuantTensor* TensorReader::packed(const model::MappedTensor& t) const {
  auto it = packed_.find(t.stored_name);
  return it == packed_.end() ? nullptr : it->second;
}

std::vector<float> TensorReader::values(const model::MappedTensor& t) const {
  if (const quant::QuantTensor* q = packed(t)) return quant::dequantize(*q);
  return io::to_f32(t.view);
}

const model::MappedTensor& TensorReader::get(const std::string& name) {
  auto it = names_.tensors.find(name);
  if (it == names_.tensors.end()) {
    throw CheckpointError(path_, "missing tensor '" + name + "' (official name" +
                                     convention_hint() + "); expected " + complete_);
  }
  const model::MappedTensor& t = it->second;
  if (!is_float_dtype(t.view.dtype)) {
    throw CheckpointError(path_, "tensor " + describe(t, name) +
                                     ": expected dtype F32, F16 or BF16, found " +
                                     std::string(dtype_name(t.view.dtype)));
  }
  consumed_.insert(name);
  return t;
}

void TensorReader::ignore(const std::string& name) {
  if (has(name)) ignored_.insert(name);
}

std::vector<float> TensorReader::vector(const std::string& name, int64_t n) {
  const model::MappedTensor& t = get(name);
  if (t.view.numel() != n) {
    throw CheckpointError(path_, "tensor " + describe(t, name) + ": expected " + std::to_string(n) +
                                     " elements (C), found shape " + t.view.shape_string());
  }
  return finite_values(t, name);
}

std::vector<float> TensorReader::finite_values(const model::MappedTensor& t,
                                               const std::string& name) {
  std::vector<float> v = values(t);
  check_finite(v.data(), DType::F32, static_cast<int64_t>(v.size()), t, name);
  return v;
}

// NaN or inf would make every logit NaN, which used to surface only as a sampler error.
void TensorReader::check_finite(const void* data, DType dtype, int64_t n,
                                const model::MappedTensor& t, const std::string& name) const {
  check_finite_weights(path_, describe(t, name), data, dtype, n);
}

const model::MappedTensor& TensorReader::matrix(const std::string& name, int64_t rows, int64_t cols,
                                                const char* what) {
  const model::MappedTensor& t = get(name);
  if (t.view.shape.size() != 2 || t.view.shape[0] != rows || t.view.shape[1] != cols) {
    throw CheckpointError(path_, "tensor " + describe(t, name) + ": expected shape [" +
                                     std::to_string(rows) + ", " + std::to_string(cols) + "] (" +
                                     what + "), found " + t.view.shape_string());
  }
  return t;
}

std::unique_ptr<Linear> TensorReader::linear(const std::string& name, int64_t out, int64_t in,
                                             const char* what) {
  return linear_of(matrix(name, out, in, what), out, in);
}

std::unique_ptr<Linear> TensorReader::linear_of(const model::MappedTensor& t, int64_t out,
                                                int64_t in) {
  if (const quant::QuantTensor* q = packed(t)) {
    if (packed_projection(*q))
      return std::make_unique<PackedLinear>(*q, packed_file_->keep_alive());
    return DenseLinear::owned_f32(quant::dequantize(*q), out, in);
  }
  return borrow(t.view, out, in);
}

std::unique_ptr<Embedding> TensorReader::embedding(const model::MappedTensor& t, int64_t rows,
                                                   int64_t cols) {
  if (const quant::QuantTensor* q = packed(t)) {
    if (packed_projection(*q))
      return std::make_unique<PackedEmbedding>(*q, packed_file_->keep_alive());
    auto values = std::make_shared<std::vector<float>>(quant::dequantize(*q));
    return std::make_unique<DenseEmbedding>(values->data(), DType::F32, cols, rows,
                                            std::shared_ptr<const void>(values, values->data()));
  }
  std::shared_ptr<Linear> lin = borrow(t.view, rows, cols);
  const void* data = lin->dense_matrix()->data;  // borrow() gives a DenseLinear
  return std::make_unique<DenseEmbedding>(data, t.view.dtype, cols, rows,
                                          std::shared_ptr<const void>(lin, data));
}

std::unique_ptr<Linear> TensorReader::lora(const std::string& name, int64_t out, int64_t in,
                                           const char* what) {
  const model::MappedTensor* probe = has(name) ? &names_.tensors.at(name) : nullptr;
  const bool linear_layout = probe && probe->linear_layout;
  const model::MappedTensor& t =
      linear_layout ? matrix(name, out, in, what) : matrix(name, in, out, what);
  // Dense fp16 / bf16 factors stay 16-bit: the dot kernels widen them exactly, so the products
  // are the same bits as from an fp32 copy, and a decode step reads half the bytes for them.
  if (packed(t) == nullptr && (t.view.dtype == DType::BF16 || t.view.dtype == DType::F16)) {
    check_finite(t.view.data, t.view.dtype, t.view.numel(), t, name);
    if (linear_layout) return borrow(t.view, out, in);
    copied_.push_back({t.view.data, t.view.nbytes});
    auto tr = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(out * in));
    const auto* src = static_cast<const uint8_t*>(t.view.data);
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        std::memcpy(&(*tr)[o * in + i], src + (i * out + o) * 2, 2);  // any alignment
    return std::make_unique<DenseLinear>(kernels::MatrixRef{tr->data(), t.view.dtype, out, in},
                                         std::shared_ptr<const void>(tr, tr->data()));
  }
  std::vector<float> v = finite_values(t, name);
  if (packed(t) == nullptr) copied_.push_back({t.view.data, t.view.nbytes});
  if (linear_layout) return DenseLinear::owned_f32(std::move(v), out, in);
  std::vector<float> tr(v.size());
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) tr[o * in + i] = v[i * out + o];
  return DenseLinear::owned_f32(std::move(tr), out, in);
}

std::unique_ptr<Linear> TensorReader::borrow(const io::TensorView& v, int64_t out,
                                             int64_t in) const {
  return borrow_dense(v.data, v.dtype, v.nbytes, out, in);
}

std::vector<std::string> TensorReader::leftovers() const {
  std::vector<std::string> left = names_.unmapped;
  for (const auto& [name, t] : names_.tensors)
    if (!consumed_.count(name) && !ignored_.count(name)) left.push_back(t.stored_name);
  return left;
}

void TensorReader::refuse_leftovers(const std::string& explanation) const {
  const std::vector<std::string> left = leftovers();
  if (left.empty()) return;
  std::string list;
  for (size_t i = 0; i < left.size() && i < 20; ++i) list += (i ? ", '" : "'") + left[i] + "'";
  if (left.size() > 20) list += ", ... (" + std::to_string(left.size()) + " in all)";
  throw CheckpointError(path_, (left.size() == 1 ? "unknown tensor " : "unknown tensors ") + list +
                                   ": " + explanation);
}

void TensorReader::tally(ModelInfo& info) const {
  std::map<DType, uint64_t> per_dtype(info.dtype_parameters.begin(), info.dtype_parameters.end());
  std::map<std::string, uint64_t> per_layout(info.packed_parameters.begin(),
                                             info.packed_parameters.end());
  for (const auto& [name, t] : names_.tensors) {
    if (ignored_.count(name)) continue;
    const auto n = static_cast<uint64_t>(t.view.numel());
    info.parameters += n;
    if (const quant::QuantTensor* q = packed(t)) {
      info.weight_bytes += q->stored_bytes();
      per_layout[q->describe()] += n;
    } else {
      info.weight_bytes += t.view.nbytes;
      per_dtype[t.view.dtype] += n;
    }
  }
  info.dtype_parameters.assign(per_dtype.begin(), per_dtype.end());
  info.packed_parameters.assign(per_layout.begin(), per_layout.end());
}

void TensorReader::hash_records(base::Sha256& h) const {
  const char zero = 0;
  for (const auto& [name, t] : names_.tensors) {
    const quant::QuantTensor* q = packed(t);
    if (!q) {
      hash_tensor_record(h, name, t.view);
      continue;
    }
    h.update(name).update(&zero, 1);
    h.update("rwkvq:" + q->describe());
    h.update(&zero, 1);
    h.update(shape_csv(t.view.shape)).update(&zero, 1);
    if (t.view.numel() <= kHashedElements) {
      const std::vector<float> v = quant::dequantize(*q);
      h.update(v.data(), v.size() * sizeof(float));
    }
  }
}

std::string TensorReader::describe(const model::MappedTensor& t,
                                   const std::string& official) const {
  if (t.stored_name == official) return "'" + official + "'";
  return "'" + t.stored_name + "' (official name '" + official + "')";
}

std::string TensorReader::convention_hint() const {
  return model::convention_hint(names_.convention);
}

}  // namespace wick::model
