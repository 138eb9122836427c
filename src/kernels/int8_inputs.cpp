#include "kernels/int8_inputs.h"

#include <algorithm>

#include "kernels/int8_matmul.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {

void round_inputs_int8(const float* x, int64_t T, int64_t cols, int8_t* codes, float* scales,
                       ThreadPool& pool) {
  const int64_t nb = int8_input_blocks(cols);
  parallel_for(pool, T, T * cols, [&](int64_t t) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kInt8InputBlock, i0 = t * cols + c0;
      scales[t * nb + b] =
          quantize_row_int8(x + i0, std::min(kInt8InputBlock, cols - c0), codes + i0);
    }
  });
}

void int8_inputs_as_floats(const Int8Inputs& x, float* out, ThreadPool& pool) {
  const int64_t nb = int8_input_blocks(x.cols);
  parallel_for(pool, x.T, x.T * x.cols, [&](int64_t t) {
    for (int64_t b = 0; b < nb; ++b) {
      const float s = x.scales[t * nb + b];
      const int64_t i0 = t * x.cols + b * kInt8InputBlock;
      const int64_t n = std::min(kInt8InputBlock, x.cols - b * kInt8InputBlock);
      for (int64_t i = i0; i < i0 + n; ++i) out[i] = static_cast<float>(x.codes[i]) * s;
    }
  });
}

}  // namespace wick::kernels
