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
    for (int64_t c = 0; c < x.cols; ++c)
      out[t * x.cols + c] =
          static_cast<float>(x.codes[t * x.cols + c]) * x.scales[t * nb + c / kInt8InputBlock];
  });
}

}  // namespace wick::kernels
