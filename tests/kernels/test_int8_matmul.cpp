// INT8 kernels (kernels/int8_matmul.h): the quantisation rule (round half to even at exact .5
// cases, the clamp, zero and underflowing groups, non-finite groups) against an independent
// reference; the groups and the outlier columns of the matrix quantiser; every SIMD kernel this
// CPU runs against the scalar reference, exactly (integer group sums), on random shapes whose
// in-sizes are not multiples of the vector width or the group, and at the int32 limit; the float
// product against a double-precision evaluation of its definition for every instruction set and
// against fp32 matmul of the dequantised operands; its accuracy on a matrix with outlier columns
// against the former per-row rule; and the determinism contract (a row of a batch equals the
// single-input product bit for bit, with 1 or 2 threads, on every instruction set).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/int8_matmul.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

// The kernel tables this CPU can run (the VNNI one only where the CPU reports VNNI; this
// project's development machine has no AVX-512, so there it is not run).
std::vector<const int8::Kernels*> runnable_kernels() {
  std::vector<const int8::Kernels*> out = {&int8::kernels_scalar()};
  if (static_cast<int>(best_supported_isa()) >= static_cast<int>(Isa::kAvx2))
    out.push_back(&int8::kernels_avx2());
  if (int8::cpu_has_avx512_vnni()) out.push_back(&int8::kernels_avx512_vnni());
  return out;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (static_cast<int>(isa) <= static_cast<int>(best_supported_isa())) out.push_back(isa);
  return out;
}

// Round half to even written out (not nearbyint): the floor, then the fraction compared with 1/2.
float reference_round(float v) {
  const double f = std::floor(static_cast<double>(v));
  const double frac = static_cast<double>(v) - f;
  if (frac < 0.5) return static_cast<float>(f);
  if (frac > 0.5) return static_cast<float>(f + 1);
  return static_cast<float>(std::fmod(f, 2.0) == 0.0 ? f : f + 1);
}

// The rule of the header, independently: scale = max|v| / 127 (fp32), code = round(v / scale)
// clamped; 0 for a zero scale.
float reference_quantize(const std::vector<float>& v, std::vector<int8_t>& codes) {
  float amax = 0;
  for (float f : v) amax = std::max(amax, std::fabs(f));
  const float scale = amax / 127.0f;
  codes.assign(v.size(), 0);
  if (scale == 0) return 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const float q = reference_round(v[i] / scale);
    codes[i] = static_cast<int8_t>(q > 127 ? 127 : q < -127 ? -127 : q);
  }
  return scale;
}

std::vector<int8_t> quantize(const std::vector<float>& v, float* scale) {
  std::vector<int8_t> c(v.size(), 99);
  *scale = quantize_row_int8(v.data(), static_cast<int64_t>(v.size()), c.data());
  return c;
}

TEST(Int8Quantizer, RoundsHalfToEvenAtExactHalves) {
  // max 127 -> scale exactly 1: v / scale = v, so every .5 is an exact tie.
  float s = 0;
  const std::vector<int8_t> c = quantize({127.0f, 0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f,
                                          126.5f, -125.5f, 2.4999998f, 2.5000002f, -127.0f},
                                         &s);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(c, (std::vector<int8_t>{127, 0, 2, 2, 4, 0, -2, -2, 126, -126, 2, 3, -127}));
  // max 254 -> scale exactly 2: ties at odd values of v.
  const std::vector<int8_t> c2 = quantize({-254.0f, 1.0f, 3.0f, 5.0f, -7.0f, 0.0f}, &s);
  EXPECT_EQ(s, 2.0f);
  EXPECT_EQ(c2, (std::vector<int8_t>{-127, 0, 2, 2, -4, 0}));
}

TEST(Int8Quantizer, ZeroAndUnderflowingRowsHaveScaleZero) {
  float s = -1;
  EXPECT_EQ(quantize({0.0f, -0.0f, 0.0f}, &s), (std::vector<int8_t>{0, 0, 0}));
  EXPECT_EQ(s, 0.0f);
  // max / 127 underflows to 0 (the smallest subnormal / 127).
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(quantize({tiny, -tiny}, &s), (std::vector<int8_t>{0, 0}));
  EXPECT_EQ(s, 0.0f);
}

TEST(Int8Quantizer, ClampsWhenTheSubnormalScaleRoundsDown) {
  // max = 178 * 2^-149: max / 127 = 1.40 * 2^-149 rounds to 2^-149, and max / scale = 178 > 127.
  const float m = std::ldexp(178.0f, -149);
  float s = 0;
  const std::vector<int8_t> c = quantize({m, -m, std::ldexp(5.0f, -149)}, &s);
  EXPECT_EQ(s, std::ldexp(1.0f, -149));
  EXPECT_EQ(c, (std::vector<int8_t>{127, -127, 5}));
}

TEST(Int8Quantizer, NonFiniteRowGivesNaNScaleAndZeroCodes) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    float s = 0;
    EXPECT_EQ(quantize({1.0f, bad, 2.0f}, &s), (std::vector<int8_t>{0, 0, 0}));
    EXPECT_TRUE(std::isnan(s));
  }
}

TEST(Int8Quantizer, RandomRowsMatchTheIndependentReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ti(-127, 126);
  int ties = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial * 7 % 300;
    const float mag = std::ldexp(1.0f, trial % 40 - 20);
    std::vector<float> v(n);
    for (float& f : v) f = nd(rng) * mag;
    if (trial % 3 == 0) {
      // Exact ties: max 127 * 2^k makes the scale 2^k, and (j + 0.5) * 2^k divides exactly.
      const float sc = std::ldexp(1.0f, trial % 20 - 10);
      v[0] = 127 * sc;
      for (int i = 1; i < n; ++i) v[i] = (static_cast<float>(ti(rng)) + 0.5f) * sc, ++ties;
    }
    std::vector<int8_t> want;
    const float want_scale = reference_quantize(v, want);
    float s = 0;
    EXPECT_EQ(quantize(v, &s), want) << "trial " << trial;
    EXPECT_EQ(s, want_scale) << "trial " << trial;
  }
  EXPECT_GT(ties, 1000);
}

// Builds fp16 / bf16 bit patterns of fp32 values (exactly representable ones).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(Int8Quantizer, MatrixQuantiserWidensRowsAndPadsWithZeros) {
  const int64_t rows = 70, cols = 100;  // 100 columns: padded to 128
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<float> f32(rows * cols);
  for (float& f : f32) f = nd(rng);
  std::vector<uint16_t> bf(rows * cols), hf(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    bf[i] = to_bf16(f32[i]);
    hf[i] = f32_to_f16(f32[i]);
  }
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const void* data = dt == DType::F32    ? static_cast<const void*>(f32.data())
                       : dt == DType::BF16 ? static_cast<const void*>(bf.data())
                                           : static_cast<const void*>(hf.data());
    const Int8Weights q = quantize_matrix_int8({data, dt, rows, cols}, test_pool(), 64);
    ASSERT_EQ(q.stride, 128);
    ASSERT_EQ(q.groups, 2);  // columns 0-63 and 64-99
    ASSERT_EQ(q.codes.size(), static_cast<size_t>(rows * 128));
    EXPECT_EQ(q.first_nonfinite_row, -1);
    EXPECT_TRUE(q.outlier_cols.empty());  // Gaussian columns: none stands out
    EXPECT_EQ(q.bytes(), static_cast<uint64_t>(rows * 128 + 2 * rows * 4));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(cols);
      for (int64_t i = 0; i < cols; ++i) {
        const int64_t k = r * cols + i;
        uint32_t u = static_cast<uint32_t>(bf[k]) << 16;
        float b;
        std::memcpy(&b, &u, 4);
        row[i] = dt == DType::F32 ? f32[k] : dt == DType::BF16 ? b : f16_to_f32(hf[k]);
      }
      for (int64_t g = 0; g < 2; ++g) {
        const int64_t i0 = g * 64, n = std::min<int64_t>(cols, i0 + 64) - i0;
        std::vector<int8_t> want;
        EXPECT_EQ(q.scales[g * rows + r],
                  reference_quantize(std::vector<float>(row.begin() + i0, row.begin() + i0 + n),
                                     want));
        ASSERT_EQ(std::memcmp(q.codes.data() + r * 128 + i0, want.data(), n), 0)
            << "row " << r << " group " << g;
      }
      for (int64_t i = cols; i < 128; ++i) ASSERT_EQ(q.codes[r * 128 + i], 0);
    }
  }
  // A non-finite weight is reported by row.
  f32[37 * cols + 5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(quantize_matrix_int8({f32.data(), DType::F32, rows, cols}, test_pool()).first_nonfinite_row, 37);
  f32[37 * cols + 5] = 0.0f;
  f32[41 * cols + 80] = std::numeric_limits<float>::quiet_NaN();  // in the second group
  EXPECT_EQ(quantize_matrix_int8({f32.data(), DType::F32, rows, cols}, test_pool(), 64).first_nonfinite_row, 41);
}

// A Gaussian matrix [rows, cols] with the given columns multiplied by `factor`.
std::vector<float> outlier_matrix(int64_t rows, int64_t cols, const std::vector<int64_t>& outliers,
                                  float factor, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(rows * cols);
  for (float& f : w) f = nd(rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c : outliers) w[r * cols + c] *= factor;
  return w;
}

TEST(Int8Quantizer, OutlierColumnsAreKeptExactlyAndLeftOutOfTheGroups) {
  const int64_t rows = 96, cols = 300;
  const std::vector<float> w = outlier_matrix(rows, cols, {200, 3}, 50.0f, 9);
  const Int8Weights q = quantize_matrix_int8({w.data(), DType::F32, rows, cols}, test_pool());
  ASSERT_EQ(q.outlier_cols, (std::vector<int32_t>{3, 200}));  // ascending
  ASSERT_EQ(q.outlier_weights.size(), static_cast<size_t>(2 * rows));
  // The rest is the matrix with those columns zeroed, quantised group by group.
  std::vector<float> rest = w;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(q.outlier_weights[r], w[r * cols + 3]);
    EXPECT_EQ(q.outlier_weights[rows + r], w[r * cols + 200]);
    rest[r * cols + 3] = rest[r * cols + 200] = 0.0f;
  }
  const Int8Weights plain =
      quantize_matrix_int8({rest.data(), DType::F32, rows, cols}, test_pool(), kInt8GroupCols, 0);
  EXPECT_TRUE(plain.outlier_cols.empty());
  EXPECT_EQ(q.codes, plain.codes);
  EXPECT_EQ(q.scales, plain.scales);
  EXPECT_EQ(q.bytes(), plain.bytes() + 2 * 4 + 2 * rows * 4);
  // At most max_outliers, the largest first; none when the ratio is not exceeded.
  const std::vector<float> w2 = outlier_matrix(rows, cols, {10, 20, 30}, 8.0f, 10);
  std::vector<float> w3 = w2;
  for (int64_t r = 0; r < rows; ++r) w3[r * cols + 20] *= 3.0f;  // column 20: 24x
  EXPECT_EQ(quantize_matrix_int8({w3.data(), DType::F32, rows, cols}, test_pool(), 128, 1).outlier_cols,
            (std::vector<int32_t>{20}));
  EXPECT_EQ(quantize_matrix_int8({w3.data(), DType::F32, rows, cols}, test_pool()).outlier_cols,
            (std::vector<int32_t>{10, 20, 30}));
  const std::vector<float> w4 = outlier_matrix(rows, cols, {7}, 2.0f, 11);
  EXPECT_TRUE(quantize_matrix_int8({w4.data(), DType::F32, rows, cols}, test_pool()).outlier_cols.empty());
  EXPECT_EQ(int8_max_outlier_columns(64), 4);
  EXPECT_EQ(int8_max_outlier_columns(3072), 12);
  // A non-finite weight in an outlier column is reported too.
  std::vector<float> w5 = w;
  w5[17 * cols + 200] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(quantize_matrix_int8({w5.data(), DType::F32, rows, cols}, test_pool()).first_nonfinite_row, 17);
}

// Random codes in [-127, 127], rows padded with zeros as the quantiser leaves them.
struct Codes {
  std::vector<int8_t> w, x;
  std::vector<float> scales;
  int64_t rows, cols, stride, nt, group;
  Int8Matrix view() const {
    Int8Matrix m;
    m.codes = w.data();
    m.scales = scales.data();
    m.rows = rows;
    m.cols = cols;
    m.stride = stride;
    m.group = group;
    m.groups = int8_groups(cols, group);
    return m;
  }
};

Codes random_codes(int64_t rows, int64_t cols, int64_t nt, uint32_t seed,
                   int64_t group = kInt8GroupCols) {
  Codes c{{}, {}, {}, rows, cols, int8_padded_cols(cols), nt, group};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  c.w.assign(rows * c.stride, 0);
  c.x.assign(nt * c.stride, 0);
  c.scales.assign(rows * int8_groups(cols, group), 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) c.w[r * c.stride + i] = static_cast<int8_t>(d(rng));
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t i = 0; i < cols; ++i) c.x[t * c.stride + i] = static_cast<int8_t>(d(rng));
  return c;
}

// Layout of the kernels: [(t * groups + g) * (r1 - r0) + (r - r0)].
std::vector<int32_t> sums_of(const int8::Kernels& k, const Codes& c, int64_t r0, int64_t r1) {
  std::vector<int32_t> s(c.nt * int8_groups(c.cols, c.group) * (r1 - r0), 0x5a5a5a5a);
  k.sums(c.view(), r0, r1, c.x.data(), c.stride, c.nt, s.data(), r1 - r0);
  return s;
}

TEST(Int8Kernels, EveryKernelEqualsTheScalarReferenceExactly) {
  const auto kernels = runnable_kernels();
  std::cout << "[int8] kernels run on this CPU:";
  for (const auto* k : kernels) std::cout << " " << k->name;
  std::cout << (int8::cpu_has_avx512_vnni() ? ""
                                            : " (no AVX-512 VNNI here: that kernel is not run)")
            << "\n";
  int checked = 0;
  uint32_t seed = 1;
  for (int64_t group : {64, 128, 192}) {
    for (int64_t cols : {1, 7, 31, 32, 33, 63, 64, 65, 100, 127, 129, 200, 768, 1000}) {
      for (int64_t rows : {1, 2, 3, 5, 8, 13, 67}) {
        for (int64_t nt : {1, 2, 3, 4, 5, 9}) {
          const Codes c = random_codes(rows, cols, nt, seed++, group);
          const int64_t G = int8_groups(cols, group);
          const std::vector<int32_t> ref = sums_of(int8::kernels_scalar(), c, 0, rows);
          // An independent int64 sum for the reference itself.
          for (int64_t t = 0; t < nt; ++t)
            for (int64_t g = 0; g < G; ++g)
              for (int64_t r = 0; r < rows; ++r) {
                int64_t s = 0;
                for (int64_t i = g * group; i < std::min(cols, (g + 1) * group); ++i)
                  s += int64_t{c.w[r * c.stride + i]} * int64_t{c.x[t * c.stride + i]};
                ASSERT_EQ(ref[(t * G + g) * rows + r], s);
              }
          for (const auto* k : kernels) {
            ASSERT_EQ(sums_of(*k, c, 0, rows), ref) << k->name << " rows=" << rows << " cols="
                                                    << cols << " nt=" << nt << " group=" << group;
            // A sub-range of rows (a work item that does not start at row 0).
            if (rows > 2) {
              const std::vector<int32_t> part = sums_of(*k, c, 1, rows - 1);
              for (int64_t tg = 0; tg < nt * G; ++tg)
                for (int64_t r = 1; r < rows - 1; ++r)
                  ASSERT_EQ(part[tg * (rows - 2) + r - 1], ref[tg * rows + r]) << k->name;
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1500);
}

TEST(Int8Kernels, ADifferentInputChangesEachSumByExactlyItsWeight) {
  // x' = x with column i moved by +1 (or -1 at 127): the sum of i's group moves by exactly
  // +-w[r, i] in every row, the other groups' sums stay.
  for (const auto* k : runnable_kernels()) {
    const Codes c = random_codes(19, 333, 1, 42);
    const int64_t G = int8_groups(c.cols, c.group);
    const std::vector<int32_t> base = sums_of(*k, c, 0, c.rows);
    for (int64_t i : {0, 31, 32, 64, 127, 128, 200, 332}) {
      Codes d = c;
      const int delta = d.x[i] == 127 ? -1 : 1;
      d.x[i] = static_cast<int8_t>(d.x[i] + delta);
      const std::vector<int32_t> moved = sums_of(*k, d, 0, d.rows);
      bool any = false;
      for (int64_t g = 0; g < G; ++g)
        for (int64_t r = 0; r < c.rows; ++r) {
          const int32_t want = g == i / c.group ? delta * c.w[r * c.stride + i] : 0;
          ASSERT_EQ(moved[g * c.rows + r] - base[g * c.rows + r], want)
              << k->name << " col " << i << " group " << g;
          any = any || moved[g * c.rows + r] != base[g * c.rows + r];
        }
      EXPECT_TRUE(any) << k->name;
    }
  }
}

TEST(Int8Kernels, ExtremeCodesAtTheColumnLimitAreExact) {
  // All codes +-127 over kInt8MaxCols columns in one group: the largest sums there are (no int16
  // saturation in AVX2's vpmaddubsw, no overflow of the VNNI lanes and their offset sums).
  const int64_t cols = kInt8MaxCols, stride = int8_padded_cols(cols);
  std::vector<int8_t> w(4 * stride), x(2 * stride);
  for (int64_t i = 0; i < cols; ++i) {
    w[i] = 127;
    w[stride + i] = -127;
    w[2 * stride + i] = static_cast<int8_t>(i % 2 ? 127 : -127);
    w[3 * stride + i] = static_cast<int8_t>(i % 3 ? -127 : 127);
    x[i] = 127;
    x[stride + i] = -127;
  }
  std::vector<float> scales(4, 1.0f);
  Int8Matrix m;
  m.codes = w.data();
  m.scales = scales.data();
  m.rows = 4;
  m.cols = cols;
  m.stride = stride;
  m.group = stride;  // one group over every column
  m.groups = 1;
  const int32_t full = static_cast<int32_t>(cols * 127 * 127);  // 2,114,060,288
  const int64_t thirds = (cols + 2) / 3;                        // columns with i % 3 == 0
  const int32_t mixed = static_cast<int32_t>((2 * thirds - cols) * 127 * 127);
  const std::vector<int32_t> want = {full, -full, 0, mixed, -full, full, 0, -mixed};
  for (const auto* k : runnable_kernels()) {
    std::vector<int32_t> s(8);
    k->sums(m, 0, 4, x.data(), stride, 2, s.data(), 4);
    EXPECT_EQ(s, want) << k->name;
  }
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = nd(rng);
  return v;
}

// The inputs' codes and group scales as int8_matmul forms them (outlier columns zeroed first).
void quantize_input(const Int8Weights& q, const float* x, std::vector<int8_t>& codes,
                    std::vector<float>& scales) {
  std::vector<float> v(x, x + q.cols);
  for (int32_t c : q.outlier_cols) v[c] = 0.0f;
  codes.assign(q.cols, 0);
  scales.assign(q.groups, 0.0f);
  for (int64_t g = 0; g < q.groups; ++g) {
    const int64_t i0 = g * q.group, n = std::min(q.cols, i0 + q.group) - i0;
    scales[g] = quantize_row_int8(v.data() + i0, n, codes.data() + i0);
  }
}

TEST(Int8Matmul, EqualsItsDefinitionInDoublePrecisionOnEveryIsa) {
  // y[t, o] = sum_g S_g * sw[o, g] * sx[t, g] + sum_j W[o, c_j] * x[t, c_j], evaluated in double
  // from the codes and scales: the fp32 epilogue rounds each of its 2 G + 2 k operations once,
  // so |y - ref| <= (2 G + 2 k + 1) * 2^-24 * sum of the terms' magnitudes.
  for (int64_t group : {64, 128}) {
    for (int64_t cols : {5, 64, 100, 300, 768, 3072}) {
      const int64_t rows = 37, T = 3;
      std::vector<int64_t> planted;
      if (cols >= 100) planted = {cols / 3, cols - 1};
      const std::vector<float> wf = outlier_matrix(rows, cols, planted, 40.0f, 21);
      const Int8Weights q =
          quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool(), group);
      ASSERT_EQ(q.outlier_cols.size(), planted.size()) << cols;
      std::vector<float> x = random_floats(T * cols, 22, 2.0f);
      for (int64_t i = 0; i < cols; ++i) x[cols + i] = 0.0f;  // an all-zero input row
      for (Isa isa : supported_isas()) {
        std::vector<float> y(T * rows);
        int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
        for (int64_t t = 0; t < T; ++t) {
          std::vector<int8_t> xc;
          std::vector<float> xs;
          quantize_input(q, x.data() + t * cols, xc, xs);
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t g = 0; g < q.groups; ++g) {
              int64_t S = 0;
              for (int64_t i = g * group; i < std::min(cols, (g + 1) * group); ++i)
                S += int64_t{q.codes[r * q.stride + i]} * int64_t{xc[i]};
              const double term = static_cast<double>(S) * q.scales[g * rows + r] * xs[g];
              ref += term;
              mag += std::fabs(term);
            }
            for (size_t j = 0; j < q.outlier_cols.size(); ++j) {
              const double term =
                  double{q.outlier_weights[j * rows + r]} * x[t * cols + q.outlier_cols[j]];
              ref += term;
              mag += std::fabs(term);
            }
            const double ops = 2.0 * q.groups + 2.0 * q.outlier_cols.size() + 1;
            ASSERT_LE(std::fabs(y[t * rows + r] - ref), ops * std::ldexp(1.0, -24) * mag)
                << isa_name(isa) << " group=" << group << " cols=" << cols << " t=" << t
                << " r=" << r;
            if (t == 1) ASSERT_EQ(y[t * rows + r], 0.0f);
          }
        }
      }
    }
  }
}

TEST(Int8Matmul, EqualsFp32MatmulOfTheDequantisedOperands) {
  // Against fp32 matmul of W_deq = code_w * sw (+ the outlier columns as stored) and x_deq =
  // code_x * sx (+ x at the outlier columns): both compute the same real number up to rounding,
  // held to 1e-6 * sum_i |W_deq[o, i] x_deq[i]| (plus 1e-30 for all-zero rows).
  for (int64_t cols : {5, 64, 100, 768, 3072}) {
    const int64_t rows = 97, T = 3;
    std::vector<float> wf = outlier_matrix(rows, cols, cols > 64 ? std::vector<int64_t>{70} :
                                                                   std::vector<int64_t>{}, 30.0f, 11);
    for (int64_t i = 0; i < cols; ++i) wf[5 * cols + i] = 0.0f;  // an all-zero row
    const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
    std::vector<float> x = random_floats(T * cols, 12, 2.0f);
    for (int64_t i = 0; i < cols; ++i) x[cols + i] = 0.0f;  // an all-zero input row
    std::vector<float> w_deq(rows * cols), x_deq(T * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < cols; ++i)
        w_deq[r * cols + i] =
            static_cast<float>(q.codes[r * q.stride + i]) * q.scales[(i / q.group) * rows + r];
    for (size_t j = 0; j < q.outlier_cols.size(); ++j)
      for (int64_t r = 0; r < rows; ++r)
        w_deq[r * cols + q.outlier_cols[j]] = q.outlier_weights[j * rows + r];
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int8_t> xc;
      std::vector<float> xs;
      quantize_input(q, x.data() + t * cols, xc, xs);
      for (int64_t i = 0; i < cols; ++i)
        x_deq[t * cols + i] = static_cast<float>(xc[i]) * xs[i / q.group];
      for (int32_t c : q.outlier_cols) x_deq[t * cols + c] = x[t * cols + c];
    }
    std::vector<float> ref(T * rows);
    matmul({w_deq.data(), DType::F32, rows, cols}, x_deq.data(), T, ref.data(), test_pool());
    for (Isa isa : supported_isas()) {
      std::vector<float> y(T * rows);
      int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          double mag = 0;
          for (int64_t i = 0; i < cols; ++i)
            mag += std::fabs(double{w_deq[r * cols + i]} * double{x_deq[t * cols + i]});
          ASSERT_NEAR(y[t * rows + r], ref[t * rows + r], 1e-6 * mag + 1e-30)
              << isa_name(isa) << " cols=" << cols << " t=" << t << " r=" << r;
          if (r == 5 || t == 1) ASSERT_EQ(y[t * rows + r], 0.0f);
        }
    }
    // And the quantised product stays near the exact one (sanity of the scales): within
    // sum over groups of (sw/2 * sum|x| + sx/2 * sum|w| + sw*sx/4 * n) per output.
    std::vector<float> exact(T * rows), y(T * rows);
    matmul({wf.data(), DType::F32, rows, cols}, x.data(), T, exact.data(), test_pool());
    int8_matmul(q.view(), x.data(), T, y.data(), test_pool());
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int8_t> xc;
      std::vector<float> xs;
      quantize_input(q, x.data() + t * cols, xc, xs);
      for (int64_t r = 0; r < rows; ++r) {
        double bound = 1e-6;
        for (int64_t g = 0; g < q.groups; ++g) {
          double xsum = 0, wsum = 0;
          const int64_t i0 = g * q.group, i1 = std::min(cols, i0 + q.group);
          for (int64_t i = i0; i < i1; ++i) {
            xsum += std::fabs(x[t * cols + i]);
            wsum += std::fabs(wf[r * cols + i]);
          }
          const double sw = q.scales[g * rows + r], sx = xs[g];
          bound += sw / 2 * xsum + sx / 2 * wsum + sw * sx / 4 * static_cast<double>(i1 - i0);
        }
        ASSERT_LE(std::fabs(double{y[t * rows + r]} - exact[t * rows + r]), bound);
      }
    }
  }
}

// Mean squared error of int8_matmul against the fp32 product, relative to the mean square of it.
double relative_mse(const Int8Weights& q, const std::vector<float>& wf, const std::vector<float>& x,
                    int64_t T) {
  std::vector<float> exact(T * q.rows), y(T * q.rows);
  matmul({wf.data(), DType::F32, q.rows, q.cols}, x.data(), T, exact.data(), test_pool());
  int8_matmul(q.view(), x.data(), T, y.data(), test_pool());
  double err = 0, ref = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    err += (double{y[i]} - exact[i]) * (double{y[i]} - exact[i]);
    ref += double{exact[i]} * exact[i];
  }
  return err / ref;
}

TEST(Int8Matmul, OutlierColumnsCostNoAccuracy) {
  // Two input columns x50 (issue 25, item 9): with the former rule (one scale per row and per
  // input row, no outlier columns: group = the whole row, max_outliers = 0) the error grows by
  // orders of magnitude; with groups of 128 and fp32 outlier columns it stays that of the plain
  // matrix.
  const int64_t rows = 256, cols = 768, T = 8;
  const std::vector<float> plain = outlier_matrix(rows, cols, {}, 1.0f, 31);
  const std::vector<float> outl = outlier_matrix(rows, cols, {100, 500}, 50.0f, 31);
  const std::vector<float> x = random_floats(T * cols, 32);
  const MatrixRef mp{plain.data(), DType::F32, rows, cols}, mo{outl.data(), DType::F32, rows, cols};
  const int64_t whole = int8_padded_cols(cols);
  const double per_row_plain = relative_mse(quantize_matrix_int8(mp, test_pool(), whole, 0), plain, x, T);
  const double per_row_outl = relative_mse(quantize_matrix_int8(mo, test_pool(), whole, 0), outl, x, T);
  const double now_plain = relative_mse(quantize_matrix_int8(mp, test_pool()), plain, x, T);
  const double now_outl = relative_mse(quantize_matrix_int8(mo, test_pool()), outl, x, T);
  std::cout << "[int8] relative MSE of the product, plain -> two columns x50: per-row scales "
            << per_row_plain << " -> " << per_row_outl << "; groups of 128 + outlier columns "
            << now_plain << " -> " << now_outl << "\n";
  EXPECT_GT(per_row_outl, 8 * per_row_plain);  // measured: ~12x
  EXPECT_LT(now_plain, per_row_plain);
  // The outlier columns are exact, so their share of the output's energy carries no error (the
  // relative error even falls: measured ~0.08x).
  EXPECT_LT(now_outl, 1.1 * now_plain);
}

TEST(Int8Matmul, NonFiniteInputRowGivesNaNOutputsForThatRowOnly) {
  const int64_t rows = 9, cols = 40;
  const std::vector<float> wf = random_floats(rows * cols, 1);
  const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
  std::vector<float> x = random_floats(2 * cols, 2);
  x[cols + 3] = std::numeric_limits<float>::infinity();
  std::vector<float> y(2 * rows);
  int8_matmul(q.view(), x.data(), 2, y.data(), test_pool());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(std::isfinite(y[r]));
    EXPECT_TRUE(std::isnan(y[rows + r]));
  }
}

// The determinism contract: output (t, o) does not depend on T, on the tile or work item it falls
// in, on the instruction set or on the thread count.
TEST(Int8Matmul, BatchRowsAreBitIdenticalToSingleInputsForAnyThreadCountAndIsa) {
  const int64_t rows = 131, cols = 300, T = 37;  // 131 rows: partial blocks and register tiles
  const std::vector<float> wf = random_floats(rows * cols, 5, 0.1f);
  const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
  const std::vector<float> x = random_floats(T * cols, 6);
  std::vector<float> first;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2}) {
      set_test_threads(threads);
      std::vector<float> y(T * rows), y1(rows);
      int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
      for (int64_t t = 0; t < T; ++t) {
        int8::int8_matmul_isa(isa, q.view(), x.data() + t * cols, 1, y1.data(), test_pool());
        ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0)
            << isa_name(isa) << " threads=" << threads << " t=" << t;
      }
      std::vector<float> y5(5 * rows);
      int8::int8_matmul_isa(isa, q.view(), x.data() + 3 * cols, 5, y5.data(), test_pool());
      ASSERT_EQ(std::memcmp(y5.data(), y.data() + 3 * rows, y5.size() * sizeof(float)), 0)
          << isa_name(isa) << " threads=" << threads;
      if (first.empty()) {
        first = y;
      } else {
        ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
            << isa_name(isa) << " threads=" << threads << " differs from scalar, 1 thread";
      }
    }
  }
  set_test_threads(0);
}

TEST(Int8Matmul, BatchRowsWithOutlierColumnsAreBitIdenticalForAnyThreadCountAndIsa) {
  // The same contract with outlier columns and groups of 64 (epilogue with many terms).
  const int64_t rows = 75, cols = 700, T = 21;
  const std::vector<float> wf = outlier_matrix(rows, cols, {3, 333, 699}, 30.0f, 41);
  const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool(), 64);
  ASSERT_EQ(q.outlier_cols.size(), 3u);
  const std::vector<float> x = random_floats(T * cols, 42);
  std::vector<float> first;
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2}) {
      set_test_threads(threads);
      std::vector<float> y(T * rows), y1(rows);
      int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
      for (int64_t t = 0; t < T; ++t) {
        int8::int8_matmul_isa(isa, q.view(), x.data() + t * cols, 1, y1.data(), test_pool());
        ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0)
            << isa_name(isa) << " threads=" << threads << " t=" << t;
      }
      if (first.empty()) {
        first = y;
      } else {
        ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
            << isa_name(isa) << " threads=" << threads << " differs from scalar, 1 thread";
      }
    }
  }
  set_test_threads(0);
}

}  // namespace
}  // namespace wick::kernels
