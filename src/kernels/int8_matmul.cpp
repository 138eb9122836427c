// INT8 matrix products (kernels/int8_matmul.h): the quantisers, the scalar reference kernel,
// instruction-set dispatch, the split of the work over the thread pool and the float epilogue.
// The SIMD sums live in int8_matmul_{avx2,avx512}.cpp.
#include "kernels/int8_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/dot.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace int8 {
namespace {

// GEMV (T = 1): blocks of output rows per work item (a 768-row matrix spreads over 12 items).
constexpr int64_t kGemvRows = 64;
// GEMM (T > 1): items of rows x inputs; the item's quantised inputs (16 x stride bytes) stay in
// L1 while its rows stream past them.
constexpr int64_t kGemmRows = 64;
constexpr int64_t kGemmInputs = 16;
// Below this many weight x input products a call runs on the calling thread (waking a worker
// costs ~1-2 us).
constexpr int64_t kParallelWork = 1 << 15;
// Weight quantisation at load: rows per work item.
constexpr int64_t kQuantizeRows = 64;

// The reference: one (row, input) pair at a time, columns in order, over the unpadded columns.
// |sum| <= cols * 127 * 127 < 2^31 (cols <= kInt8MaxCols), so int32 never overflows.
void sums_scalar(const Int8Matrix& w, int64_t r0, int64_t r1, const int8_t* xq, int64_t x_stride,
                 int64_t nt, int32_t* sums, int64_t s_stride) {
  for (int64_t t = 0; t < nt; ++t) {
    const int8_t* x = xq + t * x_stride;
    for (int64_t r = r0; r < r1; ++r) {
      const int8_t* row = w.codes + r * w.stride;
      int32_t acc = 0;
      for (int64_t i = 0; i < w.cols; ++i)
        acc += static_cast<int32_t>(row[i]) * static_cast<int32_t>(x[i]);
      sums[t * s_stride + (r - r0)] = acc;
    }
  }
}

// y = float(S) * (scale_w * scale_x): the one epilogue of every instruction set.
inline float epilogue(int32_t s, float scale_w, float scale_x) {
  return static_cast<float>(s) * (scale_w * scale_x);
}

}  // namespace

const Kernels& kernels_scalar() {
  static const Kernels k{sums_scalar, "scalar"};
  return k;
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    if (best_supported_isa() != Isa::kAvx512) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") != 0;
  }();
  return has;
#else
  return false;
#endif
}

const Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return cpu_has_avx512_vnni() ? kernels_avx512_vnni() : kernels_avx2();
    case Isa::kAvx2:
      return kernels_avx2();
    case Isa::kScalar:
      break;
  }
  return kernels_scalar();
}

void int8_matmul_isa(Isa isa, const Int8Matrix& w, const float* x, int64_t T, float* y,
                     ThreadPool& pool) {
  if (T < 1 || w.cols < 1 || w.cols > kInt8MaxCols || w.stride != int8_padded_cols(w.cols))
    __builtin_trap();  // programming errors: Int8Linear builds valid views
  if (w.rows == 0) return;
  const Kernels& k = kernels_for(isa);
  const int64_t cols = w.cols, stride = w.stride;

  // The quantised inputs and their scales, in the caller's arena (grown, never shrunk).
  Arena& arena = pool.caller_arena();
  int8_t* xq = arena.get<int8_t>(static_cast<size_t>(T * stride), Arena::kCaller0);
  float* xs = arena.get<float>(static_cast<size_t>(T), Arena::kCaller1);
  // Each input row on its own (the same routine for T = 1 and T > 1), padding zeroed.
  auto quantize_input = [&](int64_t t) {
    xs[t] = quantize_row_int8(x + t * cols, cols, xq + t * stride);
    std::memset(xq + t * stride + cols, 0, static_cast<size_t>(stride - cols));
  };
  if (T * cols < kParallelWork) {
    for (int64_t t = 0; t < T; ++t) quantize_input(t);
  } else {
    parallel_for(pool, T, quantize_input);
  }

  const bool serial = w.rows * cols * T < kParallelWork;
  if (T == 1) {
    const int64_t blocks = (w.rows + kGemvRows - 1) / kGemvRows;
    const float sx = xs[0];
    auto block = [&](int64_t b) {
      const int64_t r0 = b * kGemvRows, r1 = std::min(w.rows, r0 + kGemvRows);
      int32_t s[kGemvRows];
      k.sums(w, r0, r1, xq, stride, 1, s, kGemvRows);
      for (int64_t r = r0; r < r1; ++r) y[r] = epilogue(s[r - r0], w.scales[r], sx);
    };
    if (serial) {
      for (int64_t b = 0; b < blocks; ++b) block(b);
    } else {
      parallel_for(pool, blocks, block);
    }
    return;
  }
  const int64_t row_blocks = (w.rows + kGemmRows - 1) / kGemmRows;
  const int64_t input_blocks = (T + kGemmInputs - 1) / kGemmInputs;
  auto item = [&](int64_t i) {
    const int64_t rb = i % row_blocks, tb = i / row_blocks;
    const int64_t r0 = rb * kGemmRows, r1 = std::min(w.rows, r0 + kGemmRows);
    const int64_t t0 = tb * kGemmInputs, t1 = std::min(T, t0 + kGemmInputs);
    int32_t s[kGemmInputs * kGemmRows];
    k.sums(w, r0, r1, xq + t0 * stride, stride, t1 - t0, s, kGemmRows);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t r = r0; r < r1; ++r)
        y[t * w.rows + r] = epilogue(s[(t - t0) * kGemmRows + (r - r0)], w.scales[r], xs[t]);
  };
  if (serial) {
    for (int64_t i = 0; i < row_blocks * input_blocks; ++i) item(i);
  } else {
    parallel_for(pool, row_blocks * input_blocks, item);
  }
}

}  // namespace int8

float quantize_row_int8(const float* v, int64_t n, int8_t* codes) {
  // Written so that GCC vectorises both passes at the baseline instruction set (the row
  // quantisation of a 0.1B model at load is ~135 M elements): integer max / OR reductions over the
  // bit patterns, and rounding by the 1.5 * 2^23 addition below instead of a call.
  uint32_t amax_bits = 0, nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, 4);
    u &= 0x7fffffffu;  // |v|: for non-negative floats the bit patterns order like the values
    nonfinite |= static_cast<uint32_t>(u >= 0x7f800000u);
    amax_bits = std::max(amax_bits, u);
  }
  if (nonfinite != 0) {
    std::memset(codes, 0, static_cast<size_t>(n));
    return std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &amax_bits, 4);
  const float scale = amax / 127.0f;
  if (scale == 0.0f) {
    std::memset(codes, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  // |v / scale| <= 254: scale is amax / 127 rounded, and only a subnormal scale (at least one
  // ulp, else it is 0) can be far below it, by at most half an ulp. Below 2^22, adding 1.5 * 2^23
  // rounds to an integer, half to even (the ulp there is 1, the sum's parity is that of the
  // integer part; the default rounding mode, which wick never changes), and subtracting it again
  // is exact; the compiler may not fold the pair (no -ffast-math). Then the clamp, on integers.
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q = static_cast<int32_t>((v[i] / scale + kRound) - kRound);
    codes[i] = static_cast<int8_t>(q < -127 ? -127 : q > 127 ? 127 : q);
  }
  return scale;
}

Int8Weights quantize_matrix_int8(const MatrixRef& w, ThreadPool& pool) {
  if (w.cols < 1 || w.cols > kInt8MaxCols || w.rows < 0) {
    throw std::invalid_argument(
        "quantize_matrix_int8: expected 1 <= cols <= " + std::to_string(kInt8MaxCols) +
        " and rows >= 0, found [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "]");
  }
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16)
    throw std::invalid_argument("quantize_matrix_int8: expected an F32, F16 or BF16 matrix");
  Int8Weights q;
  q.rows = w.rows;
  q.cols = w.cols;
  q.stride = int8_padded_cols(w.cols);
  q.codes.assign(static_cast<size_t>(q.rows * q.stride), 0);
  q.scales.assign(static_cast<size_t>(q.rows), 0.0f);
  const DotKernels& dk = dot_kernels();
  const size_t es = dtype_size(w.dtype);
  const int64_t blocks = (w.rows + int8::kQuantizeRows - 1) / int8::kQuantizeRows;
  std::vector<int64_t> bad(static_cast<size_t>(blocks), -1);
  auto block = [&](int64_t b, Arena& arena) {
    float* row = arena.get<float>(static_cast<size_t>(w.cols), Arena::kBlock0);
    const int64_t r0 = b * int8::kQuantizeRows, r1 = std::min(w.rows, r0 + int8::kQuantizeRows);
    for (int64_t r = r0; r < r1; ++r) {
      const void* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r * w.cols) * es;
      const float* v = static_cast<const float*>(src);
      if (w.dtype == DType::F16) {
        dk.widen_f16(static_cast<const uint16_t*>(src), row, static_cast<size_t>(w.cols));
        v = row;
      } else if (w.dtype == DType::BF16) {
        dk.widen_bf16(static_cast<const uint16_t*>(src), row, static_cast<size_t>(w.cols));
        v = row;
      }
      q.scales[r] = quantize_row_int8(v, w.cols, q.codes.data() + r * q.stride);
      if (std::isnan(q.scales[r]) && bad[b] < 0) bad[b] = r;
    }
  };
  parallel_for(pool, blocks, block);
  for (int64_t r : bad) {
    if (r >= 0) {
      q.first_nonfinite_row = r;
      break;
    }
  }
  return q;
}

void int8_matmul(const Int8Matrix& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  int8::int8_matmul_isa(active_isa(), w, x, T, y, pool);
}

}  // namespace wick::kernels
