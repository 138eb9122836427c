// The weight-access path: every projection of the model (r/k/v/o, FFN key/value, head, the LoRA
// factors) is a Linear, y = W x with W [out, in] as nn.Linear stores it. The block code only calls
// apply(); dense weights (fp32/fp16/bf16: in place in the mapped file, or packed into panels at
// load, model/panel_packing.h) are one implementation and packed formats plug in as others,
// without touching the model arithmetic.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/int8_inputs.h"
#include "kernels/matmul.h"
#include "wick/dtype.h"

namespace wick::model {

class Linear {
 public:
  virtual ~Linear() = default;
  virtual int64_t out_features() const = 0;
  virtual int64_t in_features() const = 0;
  // Y [T, out] = X [T, in] . W^T; T = 1 is the GEMV of the recurrent step. Y must not alias X.
  // `pool` runs the kernel and holds its scratch (the caller's Runtime lease).
  virtual void apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const = 0;
  // The same product for inputs already rounded to bf16 (Precision::kBf16): implementations with
  // a faster kernel for such inputs use it (bf16 weights: the BF16 dot product, kernels/matmul.h
  // matmul_bf16_inputs); the rest run apply(). Row t of T > 1 equals the T = 1 call bit for bit.
  virtual void apply_bf16_inputs(const float* x, int64_t T, float* y,
                                 kernels::ThreadPool& pool) const {
    apply(x, T, y, pool);
  }
  // The same product for inputs rounded to 8 bits (Precision::kInt8): `x` holds the codes and
  // scales (kernels/int8_inputs.h). Implementations with an integer kernel use the codes (packed
  // sb6 and sym weights: kernels/qmatmul.h qmatmul_int8_inputs); the rest run apply() on the
  // rounded values float(code) * scale, written into `scratch` [x.T, in] (caller-owned; its
  // contents afterwards are unspecified). Row t of T > 1 equals the T = 1 call bit for bit.
  virtual void apply_int8_inputs(const kernels::Int8Inputs& x, float* scratch, float* y,
                                 kernels::ThreadPool& pool) const {
    kernels::int8_inputs_as_floats(x, scratch, pool);
    apply(scratch, x.T, y, pool);
  }
  // The matrix when apply() is kernels::matmul() over it (a dense Linear), else null: the
  // Linear's stored weights, which callers may read as such (quantise them, compare their address
  // with the embedding table's, merge an adapter into them - row-major ones: check `layout`), and
  // whose products can share one pool job with others (apply_all below). Valid as long as the
  // Linear.
  virtual const kernels::MatrixRef* dense_matrix() const { return nullptr; }
  virtual DType stored_dtype() const = 0;
  // The bytes of weights a product reads (the roofline's bytes per token): the stored bytes,
  // except where an implementation reads a form made at load (model/quant_linear.h).
  virtual uint64_t stored_bytes() const = 0;
};

// A dense matrix in fp32, fp16 or bf16, either borrowed (pointing into a mapped file that the
// model keeps alive) or owned (`storage` holds the bytes, e.g. a transposed LoRA factor), row-major
// or packed into panels (kernels/panels.h; dense_matrix()->layout says which).
class DenseLinear final : public Linear {
 public:
  DenseLinear(kernels::MatrixRef ref, std::shared_ptr<const void> storage = nullptr)
      : ref_(ref), storage_(std::move(storage)) {}
  // An owned fp32 matrix [out, in].
  static std::unique_ptr<DenseLinear> owned_f32(std::vector<float> values, int64_t out, int64_t in);
  // The row-major matrix `rows` packed into panels at `at` (kernels::panel_bytes of it, 64-byte
  // aligned; the Linear shares its ownership), the same elements: the caller may release rows'
  // memory afterwards. Its products follow the panels' summation order, which agrees with the
  // row-major one to rounding, not in bits. Throws wick::InternalError (WICK_CHECK) for a matrix
  // that is packed already or not F32/F16/BF16, or a misaligned `at`.
  static std::unique_ptr<DenseLinear> packed(const kernels::MatrixRef& rows,
                                             std::shared_ptr<uint8_t> at,
                                             kernels::ThreadPool& pool);

  int64_t out_features() const override { return ref_.rows; }
  int64_t in_features() const override { return ref_.cols; }
  void apply(const float* x, int64_t T, float* y, kernels::ThreadPool& pool) const override {
    kernels::matmul(ref_, x, T, y, pool);
  }
  void apply_bf16_inputs(const float* x, int64_t T, float* y,
                         kernels::ThreadPool& pool) const override {
    kernels::matmul_bf16_inputs(ref_, x, T, y, pool);
  }
  const kernels::MatrixRef* dense_matrix() const override { return &ref_; }
  DType stored_dtype() const override { return ref_.dtype; }
  // The matrix's elements (a packed matrix's zero rows padding its last panel not counted).
  uint64_t stored_bytes() const override {
    return static_cast<uint64_t>(ref_.rows * ref_.cols) * dtype_size(ref_.dtype);
  }

 private:
  kernels::MatrixRef ref_;
  std::shared_ptr<const void> storage_;
};

// One product of apply_all: y [T, out] = x [T, in] . W^T, as L->apply(x, T, y, pool).
struct LinearCall {
  const Linear* L = nullptr;
  const float* x = nullptr;
  float* y = nullptr;
};
// Every call's apply() over the same T rows, each result bit for bit what its apply() alone gives:
// the dense ones (dense_matrix()) as one pool job (kernels::matmul_all), the others one after
// another. For the independent products of a pass, which at decode are small enough that a pool
// job each costs a large share of their time. No call's y may overlap any call's x or another
// call's y. Throws wick::InternalError (WICK_CHECK) for more than kernels::kMaxMatmulCalls
// calls; otherwise what apply() throws.
void apply_all(std::span<const LinearCall> calls, int64_t T, kernels::ThreadPool& pool);

// A Linear over a dense [out, in] tensor of a mapped file: borrowed in place when its data is
// aligned to its element size, else copied once into aligned storage (e.g. an unpadded header).
// The caller keeps the file mapped for the Linear's lifetime.
std::unique_ptr<Linear> borrow_dense(const void* data, DType dtype, size_t nbytes, int64_t out,
                                     int64_t in);

}  // namespace wick::model
