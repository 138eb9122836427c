#include "model/linear.h"

#include <array>
#include <cstring>

#include "base/check.h"
#include "kernels/panels.h"

namespace wick::model {

std::unique_ptr<DenseLinear> DenseLinear::owned_f32(std::vector<float> values, int64_t out,
                                                    int64_t in) {
  auto storage = std::make_shared<std::vector<float>>(std::move(values));
  kernels::MatrixRef ref{storage->data(), DType::F32, out, in};
  return std::make_unique<DenseLinear>(ref, std::shared_ptr<const void>(storage, storage->data()));
}

std::unique_ptr<DenseLinear> DenseLinear::packed(const kernels::MatrixRef& rows,
                                                 std::shared_ptr<uint8_t> at,
                                                 kernels::ThreadPool& pool) {
  // 64-byte aligned: a panel's step of k is a whole vector of fp32 weights.
  WICK_CHECK(reinterpret_cast<uintptr_t>(at.get()) % 64 == 0, "packed weights are 64-byte aligned");
  const kernels::MatrixRef ref = kernels::pack_panels(rows, at.get(), pool);
  return std::make_unique<DenseLinear>(ref, std::shared_ptr<const void>(std::move(at)));
}

std::unique_ptr<Linear> borrow_dense(const void* data, DType dtype, size_t nbytes, int64_t out,
                                     int64_t in) {
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) == 0)
    return std::make_unique<DenseLinear>(kernels::MatrixRef{data, dtype, out, in});
  auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[nbytes]);
  std::memcpy(buf.get(), data, nbytes);
  return std::make_unique<DenseLinear>(kernels::MatrixRef{buf.get(), dtype, out, in},
                                       std::shared_ptr<const void>(buf, buf.get()));
}

void apply_all(std::span<const LinearCall> calls, int64_t T, kernels::ThreadPool& pool) {
  WICK_CHECK(calls.size() <= kernels::kMaxMatmulCalls,
             "apply_all takes at most kernels::kMaxMatmulCalls products");
  std::array<kernels::MatmulCall, kernels::kMaxMatmulCalls> dense;
  size_t n = 0;
  for (const LinearCall& c : calls) {
    if (const kernels::MatrixRef* w = c.L->dense_matrix())
      dense[n++] = {*w, c.x, c.y};
    else
      c.L->apply(c.x, T, c.y, pool);
  }
  if (n > 0) kernels::matmul_all(std::span<const kernels::MatmulCall>(dense.data(), n), T, pool);
}

}  // namespace wick::model
