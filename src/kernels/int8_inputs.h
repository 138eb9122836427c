// The rounding of a large product's input rows under Precision::kInt8 (wick/model.h), shared by
// every kind of weight: each row of X [T, cols] is cut into superblocks of kInt8InputBlock
// columns (the last one shorter when cols is not a multiple), and each superblock is quantised
// by the rule of kernels/int8_matmul.h on its own:
//   scale = max |v| / 127 (fp32), code = round_half_to_even(v / scale) clamped to [-127, 127];
//   an all-zero superblock (or one whose max |v| / 127 underflows to 0) has scale 0 and codes 0;
//   one holding an inf or NaN has scale NaN and codes 0 (so every product with it is NaN, as the
//   fp32 product would be non-finite).
// The rounded input is float(code) * scale, element by element. Packed sb6 and sym products take
// the codes and scales directly (kernels/qmatmul.h qmatmul_int8_inputs: integer dot products; the
// sym kernels rely on -128 never being a code); every other product takes the rounded floats.
#pragma once

#include <cstdint>

namespace wick::kernels {

class ThreadPool;

constexpr int64_t kInt8InputBlock = 256;  // columns per scale (an sb6 / sym superblock)

inline int64_t int8_input_blocks(int64_t cols) {
  return (cols + kInt8InputBlock - 1) / kInt8InputBlock;
}

// Rounded input rows, as views (the caller owns the buffers).
struct Int8Inputs {
  const int8_t* codes = nullptr;  // [T, cols]
  const float* scales = nullptr;  // [T, int8_input_blocks(cols)]
  int64_t T = 0, cols = 0;
};

// Rounds x [T, cols] (fp32 row-major) as above: codes [T, cols] and scales [T,
// int8_input_blocks(cols)]. Rows are spread over `pool` (one caller at a time); each output is a
// function of its own superblock of x alone. T >= 1, cols >= 1; the outputs must not alias x.
void round_inputs_int8(const float* x, int64_t T, int64_t cols, int8_t* codes, float* scales,
                       ThreadPool& pool);

// The rounded values of x: out [x.T, x.cols] = float(code) * scale of the code's superblock.
// Spread over `pool` as above; `out` must not alias the codes or scales.
void int8_inputs_as_floats(const Int8Inputs& x, float* out, ThreadPool& pool);

}  // namespace wick::kernels
