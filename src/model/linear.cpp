#include "model/linear.h"

namespace wick::model {

std::unique_ptr<DenseLinear> DenseLinear::owned_f32(std::vector<float> values, int64_t out,
                                                    int64_t in) {
  auto storage = std::make_shared<std::vector<float>>(std::move(values));
  kernels::MatrixRef ref{storage->data(), DType::F32, out, in};
  return std::make_unique<DenseLinear>(ref, std::shared_ptr<const void>(storage, storage->data()));
}

}  // namespace wick::model
