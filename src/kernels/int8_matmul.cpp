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
#include <vector>

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/kernel_table.h"
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

// |v| as bits: for non-negative floats the bit patterns order like the values; inf and NaN are
// >= kInfBits.
inline uint32_t abs_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7fffffffu;
}
constexpr uint32_t kInfBits = 0x7f800000u;

// codes[i] = round_half_to_even(v[i] / scale) clamped to [-127, 127], for a finite scale > 0 or
// codes 0 for scale 0 (kernels/int8_matmul.h). |v / scale| <= 254 when scale is max |v| / 127:
// it is that quotient rounded, and only a subnormal scale (at least one ulp, else it is 0) can be
// far below it, by at most half an ulp. Below 2^22, adding 1.5 * 2^23 rounds to an integer, half
// to even (the ulp there is 1, the sum's parity is that of the integer part; the default rounding
// mode, which wick never changes), and subtracting it again is exact; the compiler may not fold
// the pair (no -ffast-math). Then the clamp, on integers. Vectorised at the baseline instruction
// set.
void encode_row_int8(const float* v, int64_t n, float scale, int8_t* codes) {
  if (scale == 0.0f) {
    std::memset(codes, 0, static_cast<size_t>(n));
    return;
  }
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q = static_cast<int32_t>((v[i] / scale + kRound) - kRound);
    codes[i] = static_cast<int8_t>(q < -127 ? -127 : q > 127 ? 127 : q);
  }
}

// Quantises input row x[0..cols) into xq[0..stride) (padding zeroed) and `out`, the weight
// outlier columns of w and the row's own input outlier columns left out of the codes and the
// scale (kernels/int8_matmul.h). `tmp` holds cols floats. Without outliers this is the plain
// quantisation plus one pass over the int8 codes; a row with outliers is quantised again
// without them.
void quantize_input_row(const Int8Matrix& w, const float* x, int8_t* xq, InputRow& out,
                        float* tmp) {
  const int64_t cols = w.cols;
  const float* src = x;
  if (w.n_outliers > 0) {
    std::memcpy(tmp, x, static_cast<size_t>(cols) * sizeof(float));
    for (int64_t j = 0; j < w.n_outliers; ++j) tmp[w.outlier_cols[j]] = 0.0f;
    src = tmp;
  }
  std::memset(xq + cols, 0, static_cast<size_t>(w.stride - cols));
  out.n_outliers = 0;
  out.scale = quantize_row_int8(src, cols, xq);
  if (!(out.scale > 0.0f)) return;  // 0 (all zero) or NaN (inf / NaN in the row): no outliers
  // Codes of magnitude >= kInt8InputOutlierCode (about max / 4), else >= 2x that (about max / 2),
  // counted in one pass over the codes.
  // (Byte-wide compares and int32 sums: vectorised at the baseline instruction set.)
  int32_t wide = 0, narrow = 0;
  for (int64_t i = 0; i < cols; ++i) {
    const uint8_t a = static_cast<uint8_t>(xq[i] < 0 ? -xq[i] : xq[i]);  // codes >= -127
    wide += a >= kInt8InputOutlierCode ? 1 : 0;
    narrow += a >= 2 * kInt8InputOutlierCode ? 1 : 0;
  }
  const int64_t cap = int8_max_outliers(cols);
  const int bar = wide <= cap     ? kInt8InputOutlierCode
                  : narrow <= cap ? 2 * kInt8InputOutlierCode
                                  : 0;
  if (bar == 0) return;
  if (src != tmp) {
    std::memcpy(tmp, x, static_cast<size_t>(cols) * sizeof(float));
    src = tmp;
  }
  // The outliers leave the row; the rest is encoded again at the scale of its own max |x|
  // (the scale quantize_row_int8 would give the row without them).
  uint32_t rest_max = 0;
  for (int64_t i = 0; i < cols; ++i) {
    if ((xq[i] < 0 ? -xq[i] : xq[i]) >= bar) {
      out.outlier_cols[out.n_outliers++] = static_cast<int32_t>(i);
      tmp[i] = 0.0f;
    } else {
      rest_max = std::max(rest_max, abs_bits(tmp[i]));
    }
  }
  float amax;
  std::memcpy(&amax, &rest_max, 4);
  out.scale = amax / 127.0f;
  encode_row_int8(tmp, cols, out.scale, xq);
}

// The union of the input outlier columns of in[0 .. nt), ascending and distinct, into out
// (room for nt * kInt8MaxOutliers); returns its size.
int64_t union_outlier_columns(const InputRow* in, int64_t nt, int32_t* out) {
  int64_t n = 0;
  for (int64_t t = 0; t < nt; ++t)
    for (int32_t j = 0; j < in[t].n_outliers; ++j) out[n++] = in[t].outlier_cols[j];
  std::sort(out, out + n);
  return std::unique(out, out + n) - out;
}

}  // namespace

const Kernels& kernels_scalar() {
  static const Kernels k{sums_scalar, epilogue_rows, "scalar"};
  return k;
}

const Kernels& kernels_for(Isa isa) {
  switch (int8_isa(isa)) {
    case IntIsa::kAvx512Vnni:
      return kernels_avx512_vnni();
    case IntIsa::kAvx2:
      return kernels_avx2();
    case IntIsa::kScalar:
      break;
  }
  return kernels_scalar();
}

// int8_matmul with the kernels `k`.
static void int8_matmul_with(const Kernels& k, const Int8Matrix& w, const float* x, int64_t T,
                             float* y, ThreadPool& pool) {
  WICK_CHECK(T >= 1 && w.cols >= 1 && w.cols <= kInt8MaxCols &&
                 w.stride == int8_padded_cols(w.cols) && w.n_outliers >= 0 &&
                 w.n_outliers <= int8_max_outliers(w.cols),
             "Int8Linear builds valid views");
  if (w.rows == 0) return;
  const int64_t cols = w.cols, stride = w.stride;

  // The quantised inputs and their scales and outlier columns, in the caller's arena (grown,
  // never shrunk).
  Arena& arena = pool.caller_arena();
  int8_t* xq = arena.get<int8_t>(static_cast<size_t>(T * stride), Arena::kCaller0);
  InputRow* xin = arena.get<InputRow>(static_cast<size_t>(T), Arena::kCaller1);
  // Each input row on its own (the same routine for T = 1 and T > 1).
  auto quantize_input = [&](int64_t t, Arena& a) {
    float* tmp = a.get<float>(static_cast<size_t>(cols), Arena::kBlock1);
    quantize_input_row(w, x + t * cols, xq + t * stride, xin[t], tmp);
  };
  parallel_for(pool, T, T * cols, quantize_input);

  if (T == 1) {
    const int64_t blocks = (w.rows + kGemvRows - 1) / kGemvRows;
    auto block = [&](int64_t b, Arena& a) {
      const int64_t r0 = b * kGemvRows, r1 = std::min(w.rows, r0 + kGemvRows);
      int32_t s[kGemvRows];
      float* tile = a.get<float>(static_cast<size_t>(kInt8MaxOutliers * kGemvRows), Arena::kBlock0);
      k.sums(w, r0, r1, xq, stride, 1, s, kGemvRows);
      k.epilogue(w, r0, r1, s, kGemvRows, xin, 1, x, cols, y + r0, w.rows, xin[0].outlier_cols,
                 xin[0].n_outliers, tile);
    };
    parallel_for(pool, blocks, w.rows * cols, block);
    return;
  }
  const int64_t row_blocks = (w.rows + kGemmRows - 1) / kGemmRows;
  const int64_t input_blocks = (T + kGemmInputs - 1) / kGemmInputs;
  auto item = [&](int64_t i, Arena& a) {
    const int64_t rb = i % row_blocks, tb = i / row_blocks;
    const int64_t r0 = rb * kGemmRows, r1 = std::min(w.rows, r0 + kGemmRows);
    const int64_t t0 = tb * kGemmInputs, t1 = std::min(T, t0 + kGemmInputs);
    int32_t s[kGemmInputs * kGemmRows];
    int32_t cols_buf[kGemmInputs * kInt8MaxOutliers];
    const int64_t n_cols = union_outlier_columns(xin + t0, t1 - t0, cols_buf);
    float* tile = a.get<float>(static_cast<size_t>(n_cols * kGemmRows), Arena::kBlock0);
    k.sums(w, r0, r1, xq + t0 * stride, stride, t1 - t0, s, kGemmRows);
    k.epilogue(w, r0, r1, s, kGemmRows, xin + t0, t1 - t0, x + t0 * cols, cols,
               y + t0 * w.rows + r0, w.rows, cols_buf, n_cols, tile);
  };
  parallel_for(pool, row_blocks * input_blocks, w.rows * cols * T, item);
}

void int8_matmul_isa(Isa isa, const Int8Matrix& w, const float* x, int64_t T, float* y,
                     ThreadPool& pool) {
  int8_matmul_with(kernels_for(isa), w, x, T, y, pool);
}

}  // namespace int8

float quantize_row_int8(const float* v, int64_t n, int8_t* codes) {
  // Written so that GCC vectorises both passes at the baseline instruction set (the row
  // quantisation of a 0.1B model at load is ~135 M elements): integer max / OR reductions over the
  // bit patterns, then encode_row_int8.
  uint32_t amax_bits = 0, nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = int8::abs_bits(v[i]);
    nonfinite |= static_cast<uint32_t>(u >= int8::kInfBits);
    amax_bits = std::max(amax_bits, u);
  }
  if (nonfinite != 0) {
    std::memset(codes, 0, static_cast<size_t>(n));
    return std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &amax_bits, 4);
  const float scale = amax / 127.0f;
  int8::encode_row_int8(v, n, scale, codes);
  return scale;
}

namespace int8 {
namespace {

// Row r of w widened to fp32 into `row` (a copy also for F32: the caller edits it).
void widen_row(const MatrixRef& w, int64_t r, float* row) {
  const size_t es = dtype_size(w.dtype);
  const void* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r * w.cols) * es;
  const DotKernels& dk = dot_kernels();
  if (w.dtype == DType::F16) {
    dk.widen_f16(static_cast<const uint16_t*>(src), row, static_cast<size_t>(w.cols));
  } else if (w.dtype == DType::BF16) {
    dk.widen_bf16(static_cast<const uint16_t*>(src), row, static_cast<size_t>(w.cols));
  } else {
    std::memcpy(row, src, static_cast<size_t>(w.cols) * sizeof(float));
  }
}

// The weight outlier columns of w (kernels/int8_matmul.h), ascending: the columns whose largest
// finite |weight| exceeds kInt8OutlierRatio times the median over the columns of that maximum,
// at most max_outliers of them, the largest maxima first (ties: the lower column). Maxima do not
// depend on how the rows are split over the pool, so the choice is deterministic.
std::vector<int32_t> outlier_columns(const MatrixRef& w, int64_t max_outliers, ThreadPool& pool) {
  if (max_outliers == 0 || w.rows == 0 || w.cols < 2) return {};
  const int64_t parts = std::min<int64_t>(64, (w.rows + kQuantizeRows - 1) / kQuantizeRows);
  const int64_t per = (w.rows + parts - 1) / parts;
  std::vector<uint32_t> part_max(static_cast<size_t>(parts * w.cols), 0);
  parallel_for(pool, parts, [&](int64_t p, Arena& arena) {
    float* row = arena.get<float>(static_cast<size_t>(w.cols), Arena::kBlock0);
    uint32_t* m = part_max.data() + p * w.cols;
    for (int64_t r = p * per; r < std::min(w.rows, (p + 1) * per); ++r) {
      widen_row(w, r, row);
      for (int64_t i = 0; i < w.cols; ++i) {
        const uint32_t u = abs_bits(row[i]);
        if (u < kInfBits) m[i] = std::max(m[i], u);
      }
    }
  });
  std::vector<uint32_t> col_max(part_max.begin(), part_max.begin() + w.cols);
  for (int64_t p = 1; p < parts; ++p)
    for (int64_t i = 0; i < w.cols; ++i)
      col_max[i] = std::max(col_max[i], part_max[p * w.cols + i]);
  std::vector<uint32_t> sorted = col_max;
  std::nth_element(sorted.begin(), sorted.begin() + w.cols / 2, sorted.end());
  float median, v;
  std::memcpy(&median, &sorted[w.cols / 2], 4);
  if (!(median > 0.0f)) return {};  // most columns all zero: no scale to protect
  const float threshold = kInt8OutlierRatio * median;
  std::vector<int32_t> cand;
  for (int64_t i = 0; i < w.cols; ++i) {
    std::memcpy(&v, &col_max[i], 4);
    if (v > threshold) cand.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(cand.begin(), cand.end(),
                   [&](int32_t a, int32_t b) { return col_max[a] > col_max[b]; });
  if (static_cast<int64_t>(cand.size()) > max_outliers) cand.resize(max_outliers);
  std::sort(cand.begin(), cand.end());
  return cand;
}

}  // namespace
}  // namespace int8

Int8Weights quantize_matrix_int8(const MatrixRef& w, ThreadPool& pool, int64_t max_outliers) {
  if (w.cols < 1 || w.cols > kInt8MaxCols || w.rows < 0 || max_outliers > kInt8MaxOutliers ||
      w.layout != MatrixLayout::kRows) {
    throw std::invalid_argument("quantize_matrix_int8: expected a row-major matrix, 1 <= cols <= " +
                                std::to_string(kInt8MaxCols) + ", rows >= 0 and at most " +
                                std::to_string(kInt8MaxOutliers) + " outlier columns, found [" +
                                std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] and " +
                                std::to_string(max_outliers));
  }
  if (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16)
    throw std::invalid_argument("quantize_matrix_int8: expected an F32, F16 or BF16 matrix");
  if (max_outliers < 0) max_outliers = int8_max_outliers(w.cols);
  max_outliers = std::min(max_outliers, int8_max_outliers(w.cols));
  Int8Weights q;
  q.rows = w.rows;
  q.cols = w.cols;
  q.stride = int8_padded_cols(w.cols);
  q.outlier_cols = int8::outlier_columns(w, max_outliers, pool);
  const int64_t k = static_cast<int64_t>(q.outlier_cols.size());
  q.outlier_weights.assign(static_cast<size_t>(k * q.rows), 0.0f);
  q.codes.assign(static_cast<size_t>(q.rows * q.stride), 0);
  q.scales.assign(static_cast<size_t>(q.rows), 0.0f);
  const int64_t blocks = (w.rows + int8::kQuantizeRows - 1) / int8::kQuantizeRows;
  std::vector<int64_t> bad(static_cast<size_t>(blocks), -1);
  auto block = [&](int64_t b, Arena& arena) {
    float* row = arena.get<float>(static_cast<size_t>(w.cols), Arena::kBlock0);
    const int64_t r0 = b * int8::kQuantizeRows, r1 = std::min(w.rows, r0 + int8::kQuantizeRows);
    for (int64_t r = r0; r < r1; ++r) {
      int8::widen_row(w, r, row);
      bool nonfinite = false;
      for (int64_t j = 0; j < k; ++j) {
        const int32_t c = q.outlier_cols[j];
        q.outlier_weights[j * q.rows + r] = row[c];
        nonfinite = nonfinite || int8::abs_bits(row[c]) >= int8::kInfBits;
        row[c] = 0.0f;
      }
      q.scales[r] = quantize_row_int8(row, w.cols, q.codes.data() + r * q.stride);
      if ((nonfinite || std::isnan(q.scales[r])) && bad[b] < 0) bad[b] = r;
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
  int8::int8_matmul_with(kernel_table().int8, w, x, T, y, pool);
}

}  // namespace wick::kernels
