#include "kernels/int8_inputs.h"

#include <algorithm>

#include "kernels/int8_matmul.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {

void round_inputs_int8(const float* x, int64_t T, int64_t cols, int8_t* codes, float* scales,
                       float* rounded, ThreadPool& pool) {
  const int64_t nb = int8_input_blocks(cols);
  auto row = [&](int64_t t) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kInt8InputBlock, n = std::min(kInt8InputBlock, cols - c0);
      const int64_t i0 = t * cols + c0;
      const float s = quantize_row_int8(x + i0, n, codes + i0);
      scales[t * nb + b] = s;
      if (rounded != nullptr)
        for (int64_t i = 0; i < n; ++i) rounded[i0 + i] = static_cast<float>(codes[i0 + i]) * s;
    }
  };
  if (T * cols < (int64_t{1} << 15)) {
    for (int64_t t = 0; t < T; ++t) row(t);
  } else {
    parallel_for(pool, T, row);
  }
}

}  // namespace wick::kernels
