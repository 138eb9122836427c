#include "bench_format.h"

#include <algorithm>
#include <cstdint>

#include "bench/probes.h"
#include "wick/runtime.h"

namespace wick::cli {

std::string weight_format(const ModelInfo& i) {
  // Quantised at load (--quantize): the projections, FFN and head are int8 codes.
  if (i.quantization == WeightQuantization::kInt8) return "int8";
  if (i.container.rfind("rwkvq", 0) == 0) {
    // The layout holding most parameters names the file, e.g. "rwkvq sb6@4".
    std::string best;
    uint64_t most = 0;
    for (auto& [l, n] : i.packed_parameters)
      if (n > most) most = n, best = l;
    return "rwkvq " + best;
  }
  std::string f;
  uint64_t most = 0;
  for (auto& [d, n] : i.dtype_parameters)
    if (n > most) most = n, f = std::string(dtype_name(d));
  return f;
}

bool products_run_bf16_dot(const Model& model) {
  const auto choices = kernel_choices();
  const bool bf16_kernel = std::any_of(choices.begin(), choices.end(), [](const auto& c) {
    return c.first == "bf16-dot" && c.second != "fp32-dot";
  });
  return model.precision() == Precision::kBf16 &&
         weight_format(model.info()) == dtype_name(DType::BF16) && bf16_kernel &&
         bench::has_bf16_dot_peak();
}

}  // namespace wick::cli
