// INT8 kernels (kernels/int8_matmul.h): the quantisation rule (round half to even at exact .5
// cases, the clamp, zero and underflowing rows, non-finite rows) against an independent
// reference; every SIMD kernel this CPU runs against the scalar reference, exactly (integer
// sums), on random shapes whose in-sizes are not multiples of the vector width and at the int32
// limit; the float product against fp32 matmul of the dequantised operands; and the determinism
// contract (a row of a batch equals the single-input product bit for bit, with 1 or 2 threads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "test_util.h"
#include "kernels/cpu_features.h"
#include "base/fp16.h"
#include "kernels/int8_matmul.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;
using base::f16_to_f32;
using base::f32_to_f16;

// The kernel tables this CPU can run (the VNNI one only where the CPU reports VNNI).
std::vector<const int8::Kernels*> runnable_kernels() {
  std::vector<const int8::Kernels*> out = {&int8::kernels_scalar()};
  if (this_cpu_has(Isa::kAvx2)) out.push_back(&int8::kernels_avx2());
  if (int8::cpu_has_avx512_vnni()) out.push_back(&int8::kernels_avx512_vnni());
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
    const Int8Weights q = quantize_matrix_int8({data, dt, rows, cols}, test_pool());
    ASSERT_EQ(q.stride, 128);
    ASSERT_EQ(q.codes.size(), static_cast<size_t>(rows * 128));
    EXPECT_EQ(q.first_nonfinite_row, -1);
    EXPECT_EQ(q.bytes(), static_cast<uint64_t>(rows * 128 + rows * 4));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(cols);
      for (int64_t i = 0; i < cols; ++i) {
        const int64_t k = r * cols + i;
        uint32_t u = static_cast<uint32_t>(bf[k]) << 16;
        float b;
        std::memcpy(&b, &u, 4);
        row[i] = dt == DType::F32 ? f32[k] : dt == DType::BF16 ? b : f16_to_f32(hf[k]);
      }
      std::vector<int8_t> want;
      EXPECT_EQ(q.scales[r], reference_quantize(row, want));
      ASSERT_EQ(std::memcmp(q.codes.data() + r * 128, want.data(), cols), 0) << "row " << r;
      for (int64_t i = cols; i < 128; ++i) ASSERT_EQ(q.codes[r * 128 + i], 0);
    }
  }
  // A non-finite weight is reported by row.
  f32[37 * cols + 5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(quantize_matrix_int8({f32.data(), DType::F32, rows, cols}, test_pool()).first_nonfinite_row, 37);
}

// Random codes in [-127, 127], rows padded with zeros as the quantiser leaves them.
struct Codes {
  std::vector<int8_t> w, x;
  std::vector<float> scales;
  int64_t rows, cols, stride, nt;
  Int8Matrix view() const { return {w.data(), scales.data(), rows, cols, stride}; }
};

Codes random_codes(int64_t rows, int64_t cols, int64_t nt, uint32_t seed) {
  Codes c{{}, {}, {}, rows, cols, int8_padded_cols(cols), nt};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-127, 127);
  c.w.assign(rows * c.stride, 0);
  c.x.assign(nt * c.stride, 0);
  c.scales.assign(rows, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) c.w[r * c.stride + i] = static_cast<int8_t>(d(rng));
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t i = 0; i < cols; ++i) c.x[t * c.stride + i] = static_cast<int8_t>(d(rng));
  return c;
}

std::vector<int32_t> sums_of(const int8::Kernels& k, const Codes& c, int64_t r0, int64_t r1) {
  std::vector<int32_t> s(c.nt * (r1 - r0), 0x5a5a5a5a);
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
  for (int64_t cols : {1, 7, 31, 32, 33, 63, 64, 65, 100, 127, 129, 200, 768, 1000}) {
    for (int64_t rows : {1, 2, 3, 5, 8, 13, 67}) {
      for (int64_t nt : {1, 2, 3, 4, 5, 9}) {
        const Codes c = random_codes(rows, cols, nt, seed++);
        const std::vector<int32_t> ref = sums_of(int8::kernels_scalar(), c, 0, rows);
        // An independent int64 sum for the reference itself.
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            int64_t s = 0;
            for (int64_t i = 0; i < cols; ++i)
              s += int64_t{c.w[r * c.stride + i]} * int64_t{c.x[t * c.stride + i]};
            ASSERT_EQ(ref[t * rows + r], s);
          }
        for (const auto* k : kernels) {
          ASSERT_EQ(sums_of(*k, c, 0, rows), ref)
              << k->name << " rows=" << rows << " cols=" << cols << " nt=" << nt;
          // A sub-range of rows (a work item that does not start at row 0).
          if (rows > 2) {
            const std::vector<int32_t> part = sums_of(*k, c, 1, rows - 1);
            for (int64_t t = 0; t < nt; ++t)
              for (int64_t r = 1; r < rows - 1; ++r)
                ASSERT_EQ(part[t * (rows - 2) + r - 1], ref[t * rows + r]) << k->name;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(Int8Kernels, ADifferentInputChangesEachSumByExactlyItsWeight) {
  // x' = x with column i moved by +1 (or -1 at 127): every row's sum moves by exactly +-w[r, i].
  for (const auto* k : runnable_kernels()) {
    const Codes c = random_codes(19, 333, 1, 42);
    const std::vector<int32_t> base = sums_of(*k, c, 0, c.rows);
    for (int64_t i : {0, 31, 32, 64, 200, 332}) {
      Codes d = c;
      const int delta = d.x[i] == 127 ? -1 : 1;
      d.x[i] = static_cast<int8_t>(d.x[i] + delta);
      const std::vector<int32_t> moved = sums_of(*k, d, 0, d.rows);
      bool any = false;
      for (int64_t r = 0; r < c.rows; ++r) {
        ASSERT_EQ(moved[r] - base[r], delta * c.w[r * c.stride + i]) << k->name << " col " << i;
        any = any || moved[r] != base[r];
      }
      EXPECT_TRUE(any) << k->name;
    }
  }
}

TEST(Int8Kernels, ExtremeCodesAtTheColumnLimitAreExact) {
  // All codes +-127 over kInt8MaxCols columns: the largest sums there are (no int16 saturation in
  // AVX2's vpmaddubsw, the VNNI offset sum wraps and comes back).
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
  const Int8Matrix m{w.data(), scales.data(), 4, cols, stride};
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

// The input outlier columns of one row by the header's rule, written independently: with v the
// row less the weight outlier columns, quantised whole, the columns whose |code| >= 32 when at
// most int8_max_outliers(cols) of them, else those >= 64 when few enough, else none.
std::vector<int64_t> reference_input_outliers(const std::vector<float>& v) {
  const int64_t cols = static_cast<int64_t>(v.size());
  const int64_t cap = cols < 1024 ? 4 : std::min<int64_t>(16, cols / 256);
  for (float f : v)
    if (!std::isfinite(f)) return {};
  std::vector<int8_t> codes;
  if (reference_quantize(v, codes) == 0) return {};
  for (int bar : {32, 64}) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < cols; ++i)
      if (std::abs(int{codes[i]}) >= bar) out.push_back(i);
    if (static_cast<int64_t>(out.size()) <= cap) return out;
  }
  return {};
}

// Y of kernels/int8_matmul.h computed independently, in double, from the quantised weights q
// (codes, scales, weight outlier columns) and the fp32 inputs x [T, cols]: the integer part as
// the product of the dequantised operands, plus the weight outlier columns (fp32 weights) and the
// row's input outlier columns (dequantised weights) in fp32 values. mag[t * rows + r] gets the
// sum of the magnitudes of the terms (the scale of the rounding errors).
std::vector<double> reference_product(const Int8Weights& q, const std::vector<float>& x,
                                      int64_t T, std::vector<double>* mag,
                                      std::vector<std::vector<int64_t>>* input_outliers) {
  const int64_t rows = q.rows, cols = q.cols;
  std::vector<double> y(T * rows, 0.0);
  mag->assign(T * rows, 0.0);
  input_outliers->assign(T, {});
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> v(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    for (int32_t c : q.outlier_cols) v[c] = 0.0f;
    const std::vector<int64_t> dyn = reference_input_outliers(v);
    (*input_outliers)[t] = dyn;
    for (int64_t c : dyn) v[c] = 0.0f;
    std::vector<int8_t> xc;
    const float sx = reference_quantize(v, xc);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0, m = 0;
      auto add = [&](double term) {
        acc += term;
        m += std::fabs(term);
      };
      for (int64_t i = 0; i < cols; ++i)
        add(double{static_cast<float>(q.codes[r * q.stride + i]) * q.scales[r]} *
            (double{static_cast<float>(xc[i])} * sx));
      for (size_t j = 0; j < q.outlier_cols.size(); ++j)
        add(double{q.outlier_weights[j * rows + r]} * x[t * cols + q.outlier_cols[j]]);
      for (int64_t c : dyn)
        add(double{static_cast<float>(q.codes[r * q.stride + c]) * q.scales[r]} *
            x[t * cols + c]);
      y[t * rows + r] = acc;
      (*mag)[t * rows + r] = m;
    }
  }
  return y;
}

TEST(Int8Matmul, EqualsTheIndependentReferenceProduct) {
  // Y against reference_product(): the same real number, the int8 path with a few fp32 roundings
  // per term, held to 1e-6 * sum |terms| (plus 1e-30 for all-zero rows). Inputs with and without
  // outliers (a row with two channels x50, a sparse row, a row whose top values crowd together),
  // weights with and without outlier columns.
  for (int64_t cols : {5, 64, 100, 768, 3072}) {
    for (bool weight_outliers : {false, true}) {
      const int64_t rows = 97, T = 6;
      std::vector<float> wf = random_floats(rows * cols, 11, 0.05f);
      for (int64_t i = 0; i < cols; ++i) wf[5 * cols + i] = 0.0f;  // an all-zero row
      if (weight_outliers && cols >= 64)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c : {int64_t{3}, cols - 7}) wf[r * cols + c] *= 60.0f;
      const Int8Weights q =
          quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
      if (weight_outliers && cols >= 64) {
        EXPECT_EQ(q.outlier_cols, (std::vector<int32_t>{3, static_cast<int32_t>(cols - 7)}));
      } else {
        EXPECT_TRUE(q.outlier_cols.empty()) << cols;
      }
      std::vector<float> x = random_floats(T * cols, 12, 2.0f);
      for (int64_t i = 0; i < cols; ++i) x[cols + i] = 0.0f;  // an all-zero input row
      if (cols >= 64) {
        x[2 * cols + 10] = 300.0f;  // two channel outliers
        x[2 * cols + cols / 2] = -250.0f;
        for (int64_t i = 0; i < cols; ++i) x[3 * cols + i] = i % 17 == 0 ? 1.0f + i : 0.0f;
        for (int64_t i = 0; i < cols; ++i) x[4 * cols + i] *= 0.01f;  // then 6 close values
        for (int64_t i = 0; i < 6; ++i) x[4 * cols + 9 * i + 1] = 3.0f + 0.1f * i;
      }
      std::vector<double> mag;
      std::vector<std::vector<int64_t>> dyn;
      const std::vector<double> ref = reference_product(q, x, T, &mag, &dyn);
      if (cols >= 64) {
        EXPECT_EQ(dyn[2], (std::vector<int64_t>{10, cols / 2})) << cols;
        EXPECT_TRUE(dyn[1].empty());
        EXPECT_EQ(dyn[4].size(), cols < 1024 ? 0u : 6u) << cols;  // 6 <= cap from 1536 columns
      }
      for (Isa isa : isas_of_this_cpu()) {
        std::vector<float> y(T * rows);
        int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[t * rows + r], ref[t * rows + r], 1e-6 * mag[t * rows + r] + 1e-30)
                << isa_name(isa) << " cols=" << cols << " t=" << t << " r=" << r;
            if ((r == 5 && !weight_outliers) || t == 1) ASSERT_EQ(y[t * rows + r], 0.0f);
          }
      }
      // And the quantised product stays near the exact one (sanity of the scales): within
      // (sw/2 * sum|x| + sx/2 * sum|w| + sw*sx/4 * cols) per output, sx from the whole row.
      std::vector<float> exact(T * rows), y(T * rows);
      matmul({wf.data(), DType::F32, rows, cols}, x.data(), T, exact.data(), test_pool());
      int8_matmul(q.view(), x.data(), T, y.data(), test_pool());
      for (int64_t t = 0; t < T; ++t) {
        float amax = 0;
        double xsum = 0;
        for (int64_t i = 0; i < cols; ++i) {
          amax = std::max(amax, std::fabs(x[t * cols + i]));
          xsum += std::fabs(x[t * cols + i]);
        }
        const double sx = amax / 127.0;
        for (int64_t r = 0; r < rows; ++r) {
          double wsum = 0;
          for (int64_t i = 0; i < cols; ++i) wsum += std::fabs(wf[r * cols + i]);
          const double sw = q.scales[r];
          const double bound = sw / 2 * xsum + sx / 2 * wsum + sw * sx / 4 * cols + 1e-6;
          ASSERT_LE(std::fabs(double{y[t * rows + r]} - exact[t * rows + r]), bound);
        }
      }
    }
  }
}

// The documented fp32 sequence, bit for bit: float(S) * (scale_w * scale_x), then each weight
// outlier column's W * x, then each input outlier column's (float(code) * scale_w) * x, in
// column order, each operation rounded on its own - written out here from the quantised data
// (integer sums in int64) and compared exactly with every instruction set's output.
TEST(Int8Matmul, EachOutputIsTheDocumentedFp32Sequence) {
  for (int64_t cols : {70, 768, 3072}) {
    const int64_t rows = 45, T = 5;
    std::vector<float> wf = random_floats(rows * cols, 31, 0.05f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c : {int64_t{2}, cols - 3}) wf[r * cols + c] *= 40.0f;
    const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
    ASSERT_EQ(q.outlier_cols.size(), 2u);
    std::vector<float> x = random_floats(T * cols, 32, 1.0f);
    for (int64_t t = 0; t < T; ++t) {  // channels 9 and 40 large in some rows, one or none in others
      if (t != 1) x[t * cols + 9] = 60.0f + t;
      if (t % 2 == 0) x[t * cols + 40] = -75.0f - t;
    }
    std::vector<float> want(T * rows);
    int64_t with_input_outliers = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> v(x.begin() + t * cols, x.begin() + (t + 1) * cols);
      for (int32_t c : q.outlier_cols) v[c] = 0.0f;
      const std::vector<int64_t> dyn = reference_input_outliers(v);
      with_input_outliers += dyn.empty() ? 0 : 1;
      for (int64_t c : dyn) v[c] = 0.0f;
      std::vector<int8_t> xc;
      const float sx = reference_quantize(v, xc);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t sum = 0;
        for (int64_t i = 0; i < cols; ++i) sum += int64_t{q.codes[r * q.stride + i]} * xc[i];
        const float sw = q.scales[r];
        const float prod = sw * sx;
        float y = static_cast<float>(sum) * prod;
        for (size_t j = 0; j < q.outlier_cols.size(); ++j) {
          const float term = q.outlier_weights[j * rows + r] * x[t * cols + q.outlier_cols[j]];
          y = y + term;
        }
        for (int64_t c : dyn) {
          const float wdq = static_cast<float>(q.codes[r * q.stride + c]) * sw;
          const float term = wdq * x[t * cols + c];
          y = y + term;
        }
        want[t * rows + r] = y;
      }
    }
    EXPECT_EQ(with_input_outliers, T - 1) << cols;  // row 1 has none
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> y(T * rows);
      int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), test_pool());
      for (int64_t i = 0; i < T * rows; ++i)
        ASSERT_EQ(std::memcmp(&y[i], &want[i], sizeof(float)), 0)
            << isa_name(isa) << " cols=" << cols << " output " << i << ": " << y[i] << " vs "
            << want[i];
    }
  }
}

// Issue 25, item 9: two outlier channels, on either side of the product, no longer set the scale
// of everything else. The error against the exact fp32 product, with outliers, stays near the
// error without them and far below what one scale per row (the rule before) gives.
TEST(Int8Matmul, OutlierChannelsOnEitherSideCostLittleAccuracy) {
  const int64_t rows = 256, cols = 768, T = 8;
  const std::vector<float> w0 = random_floats(rows * cols, 21, 0.05f);
  const std::vector<float> x0 = random_floats(T * cols, 22, 1.0f);
  // Mean |error| against the exact product (in units of the clean model's mean |output|), with
  // the rule of the header, and with one scale per row on both sides (weights quantised with no
  // outlier columns, inputs quantised whole by quantize_row_int8 and multiplied out in double).
  double unit = 0;
  auto errors = [&](const std::vector<float>& w, const std::vector<float>& x, double* per_row) {
    std::vector<float> exact(T * rows), y(T * rows);
    matmul({w.data(), DType::F32, rows, cols}, x.data(), T, exact.data(), test_pool());
    const Int8Weights q = quantize_matrix_int8({w.data(), DType::F32, rows, cols}, test_pool());
    int8_matmul(q.view(), x.data(), T, y.data(), test_pool());
    const Int8Weights p =
        quantize_matrix_int8({w.data(), DType::F32, rows, cols}, test_pool(), 0);
    double e = 0, e_row = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int8_t> xc(cols);
      const float sx = quantize_row_int8(x.data() + t * cols, cols, xc.data());
      for (int64_t r = 0; r < rows; ++r) {
        double acc = 0;
        for (int64_t i = 0; i < cols; ++i)
          acc += static_cast<double>(p.codes[r * p.stride + i]) * xc[i];
        e += std::fabs(double{y[t * rows + r]} - exact[t * rows + r]);
        e_row += std::fabs(acc * p.scales[r] * sx - exact[t * rows + r]);
        if (&w == &w0 && &x == &x0) unit += std::fabs(exact[t * rows + r]);
      }
    }
    *per_row = e_row / unit;
    return e / unit;
  };
  double clean_row = 0, w_row = 0, x_row = 0;
  const double clean = errors(w0, x0, &clean_row);
  std::vector<float> w1 = w0, x1 = x0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c : {100, 500}) w1[r * cols + c] *= 50.0f;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c : {100, 500}) x1[t * cols + c] *= 50.0f;
  const double with_w = errors(w1, x0, &w_row), with_x = errors(w0, x1, &x_row);
  std::cout << "[int8] mean |error| / mean |clean output|: clean " << clean << " (per-row rule " << clean_row
            << "), weight outlier columns " << with_w << " (" << w_row
            << "), input outlier channels " << with_x << " (" << x_row << ")\n";
  EXPECT_GT(clean, 0.0);
  EXPECT_NEAR(clean, clean_row, 1e-3 * clean);  // no outliers: the same product
  EXPECT_LT(with_w, 1.5 * clean);
  EXPECT_LT(with_x, 3.0 * clean);
  EXPECT_GT(w_row, 10.0 * with_w);
  // What is left is the weights' own rounding error times the 50x values (measured 0.0247
  // against 0.0108 clean and 0.120 with one scale per row).
  EXPECT_GT(x_row, 4.0 * with_x);
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
  // 131 rows: partial blocks and register tiles. Two weight outlier columns; input outlier
  // channels that differ from row to row (so the work items' column unions differ).
  const int64_t rows = 131, cols = 300, T = 37;
  std::vector<float> wf = random_floats(rows * cols, 5, 0.1f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c : {17, 290}) wf[r * cols + c] *= 40.0f;
  const Int8Weights q = quantize_matrix_int8({wf.data(), DType::F32, rows, cols}, test_pool());
  ASSERT_EQ(q.outlier_cols.size(), 2u);
  std::vector<float> x = random_floats(T * cols, 6);
  for (int64_t t = 0; t < T; ++t) {
    if (t % 3 != 2) x[t * cols + 40] *= 30.0f;
    if (t % 4 == 1) x[t * cols + 41 + t] *= -45.0f;
  }
  std::vector<float> first;
  for (Isa isa : isas_of_this_cpu()) {
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

}  // namespace
}  // namespace wick::kernels
