// The BF16 dot product of Precision::kBf16 (kernels/dot.h: Bf16DotKernels, vdpbf16ps) against a
// double-precision reference, its GEMV / GEMM tile / matmul against each other bit for bit
// (whatever the row count, the row's place in its group, the thread count), and the fallback of
// matmul_bf16_inputs where it does not apply. The kernel checks run where the CPU has AVX-512 BF16
// (elsewhere bf16_dot_kernels_for gives null, which is checked instead).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "test_util.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

// n random bf16 values (normal, scale 1).
std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<uint16_t> v(n);
  for (auto& b : v) b = base::f32_to_bf16(nd(rng));
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& b) {
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) f[i] = base::bf16_to_f32(b[i]);
  return f;
}

const Bf16DotKernels* kernels_here() {
  return bf16_dot_kernels_for(best_supported_isa());
}

TEST(Bf16Dot, PresentExactlyOnAvx512Bf16Cpus) {
  const bool has = best_supported_isa() == Isa::kAvx512 && cpu_has_avx512_bf16();
  EXPECT_EQ(kernels_here() != nullptr, has);
  EXPECT_EQ(bf16_dot_kernels_for(Isa::kAvx2), nullptr);
  EXPECT_EQ(bf16_dot_kernels_for(Isa::kScalar), nullptr);
  if (has) EXPECT_STREQ(kernels_here()->name, "avx512-bf16");
}

TEST(Bf16Dot, GemvAgreesWithDoubleReference) {
  const Bf16DotKernels* k = kernels_here();
  if (k == nullptr) return;  // no BF16 dot product on this CPU (checked above)
  std::mt19937 rng(11);
  for (size_t n : {1u, 2u, 15u, 31u, 32u, 33u, 63u, 64u, 65u, 100u, 768u, 777u, 3072u}) {
    const int nr = 11;
    const std::vector<uint16_t> w = random_bf16(nr * n, rng), x = random_bf16(n, rng);
    std::vector<float> y(nr);
    k->gemv(w.data(), n, x.data(), n, nr, y.data());
    for (int r = 0; r < nr; ++r) {
      double ref = 0, mag = 0;
      for (size_t i = 0; i < n; ++i) {
        const double p = double(base::bf16_to_f32(w[r * n + i])) * base::bf16_to_f32(x[i]);
        ref += p;
        mag += std::abs(p);
      }
      // fp32 accumulation: a rounding per step of 32 elements plus the lane tree.
      const double tol = 2e-7 * (double(n) / 32 + 8) * (mag + 1e-30);
      EXPECT_NEAR(y[r], ref, tol) << "n=" << n << " row " << r;
    }
    // A different input gives a different output.
    std::vector<uint16_t> x2 = x;
    x2[n / 2] = base::f32_to_bf16(base::bf16_to_f32(x2[n / 2]) + 1.f);
    std::vector<float> y2(nr);
    k->gemv(w.data(), n, x2.data(), n, nr, y2.data());
    EXPECT_NE(std::memcmp(y.data(), y2.data(), nr * sizeof(float)), 0) << "n=" << n;
  }
}

TEST(Bf16Dot, TileAndGroupedRowsAreBitIdenticalToSingleRows) {
  const Bf16DotKernels* k = kernels_here();
  if (k == nullptr) return;
  std::mt19937 rng(5);
  for (size_t n : {1u, 7u, 32u, 33u, 100u, 768u}) {
    const int nr = 11, nt = 9;
    const std::vector<uint16_t> w = random_bf16(nr * n, rng), x = random_bf16(nt * n, rng);
    // One row at a time: the reference bits.
    std::vector<float> one(nt * nr);
    for (int t = 0; t < nt; ++t)
      for (int r = 0; r < nr; ++r) k->gemv(w.data() + r * n, n, x.data() + t * n, n, 1, &one[t * nr + r]);
    // Grouped GEMV (the trait's rows interleaved, then the rest).
    for (int t = 0; t < nt; ++t) {
      std::vector<float> y(nr);
      k->gemv(w.data(), n, x.data() + t * n, n, nr, y.data());
      EXPECT_EQ(std::memcmp(y.data(), &one[t * nr], nr * sizeof(float)), 0) << "n=" << n;
    }
    // Every tile shape, rows and inputs from 1 up.
    for (int tr = 1; tr <= nr; ++tr) {
      for (int tt = 1; tt <= nt; tt += 2) {
        std::vector<float> y(tt * nr, -1.f);
        // With a prefetch target (the rows themselves): it must change nothing.
        k->gemm_tile(w.data(), n, x.data(), n, n, tr, tt, y.data(), nr, w.data());
        for (int t = 0; t < tt; ++t)
          EXPECT_EQ(std::memcmp(&y[t * nr], &one[t * nr], tr * sizeof(float)), 0)
              << "n=" << n << " tile " << tr << "x" << tt << " input " << t;
      }
    }
  }
}

TEST(Bf16Dot, PackGivesTheBitsOfRoundedValues) {
  const Bf16DotKernels* k = kernels_here();
  if (k == nullptr) return;
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.f, 100.f);
  for (size_t n : {1u, 15u, 16u, 17u, 100u}) {
    std::vector<float> x(n);
    for (auto& v : x) v = nd(rng);
    x[0] = -0.f;
    if (n > 2) x[2] = std::numeric_limits<float>::infinity();
    base::round_to_bf16(x.data(), x.data(), n);
    std::vector<uint16_t> got(n + 1, 0xabcd);
    k->pack(x.data(), got.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], base::f32_to_bf16(x[i])) << "n=" << n << " " << i;
    EXPECT_EQ(got[n], 0xabcd) << "wrote past the end, n=" << n;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t b = 0;
  k->pack(&nan, &b, 1);
  EXPECT_TRUE(std::isnan(base::bf16_to_f32(b)));
}

// matmul_bf16_inputs: GEMM rows equal the GEMV of their input, on 1 and 2 threads; with weights
// other than bf16 it is matmul(); close to the fp32 kernels on the same rounded inputs.
TEST(Bf16Dot, MatmulRowsEqualTheirGemvAndNearTheFp32Product) {
  std::mt19937 rng(3);
  const int64_t rows = 300, cols = 777, T = 37;
  const std::vector<uint16_t> w = random_bf16(rows * cols, rng), xb = random_bf16(T * cols, rng);
  const std::vector<float> x = widened(xb);
  const MatrixRef ref{w.data(), DType::BF16, rows, cols};
  std::vector<float> y(T * rows), y1(rows), y2(T * rows), yf(T * rows);
  set_test_threads(2);
  matmul_bf16_inputs(ref, x.data(), T, y.data(), test_pool());
  for (int64_t t = 0; t < T; ++t) {
    matmul_bf16_inputs(ref, x.data() + t * cols, 1, y1.data(), test_pool());
    ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0) << t;
  }
  set_test_threads(1);
  matmul_bf16_inputs(ref, x.data(), T, y2.data(), test_pool());
  EXPECT_EQ(std::memcmp(y2.data(), y.data(), y.size() * sizeof(float)), 0);
  // The fp32 kernels on the same operands: equal where no BF16 dot product runs, close where it
  // does (another summation order).
  matmul(ref, x.data(), T, yf.data(), test_pool());
  set_test_threads(0);
  if (bf16_dot_kernels() == nullptr) {
    EXPECT_EQ(std::memcmp(yf.data(), y.data(), y.size() * sizeof(float)), 0);
  } else {
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yf[i], 2e-4 * (1 + std::abs(yf[i]))) << i;
  }
  // fp32 weights never take the BF16 kernel.
  const std::vector<float> wf = widened(w);
  const MatrixRef reff{wf.data(), DType::F32, rows, cols};
  std::vector<float> a(T * rows), b(T * rows);
  matmul_bf16_inputs(reff, x.data(), T, a.data(), test_pool());
  matmul(reff, x.data(), T, b.data(), test_pool());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace wick::kernels
