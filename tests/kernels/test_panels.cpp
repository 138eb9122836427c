// The panel layout and its kernels (kernels/panels.h): the packing against the layout's formula,
// every ISA's GEMV and GEMM against the documented chain of fused multiply-adds (bit for bit) and
// against a double-precision sum (to rounding), GEMM rows against the GEMV, thread counts, and a
// changed input changing exactly its own outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "test_util.h"
#include "base/fp16.h"
#include "kernels/dot.h"
#include "kernels/panels.h"
#include "kernels/thread_pool.h"
#include "wick/errors.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

// A rows x cols matrix of one dtype, its exact fp32 values and its packed form.
struct Matrix {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> stored;  // row-major, dtype elements
  std::vector<float> values;    // the same, widened exactly
  std::vector<uint8_t> packed;
  MatrixRef panels;
};

Matrix make_matrix(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  Matrix m{dtype, rows, cols, {}, {}, {}, {}};
  const size_t n = static_cast<size_t>(rows * cols);
  m.stored.resize(n * dtype_size(dtype));
  m.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float v = nd(rng);
    if (dtype == DType::F32) {
      std::memcpy(m.stored.data() + 4 * i, &v, 4);
      m.values[i] = v;
      continue;
    }
    const uint16_t h = dtype == DType::F16 ? base::f32_to_f16(v) : base::f32_to_bf16(v);
    std::memcpy(m.stored.data() + 2 * i, &h, 2);
    m.values[i] = dtype == DType::F16 ? base::f16_to_f32(h) : base::bf16_to_f32(h);
  }
  // A dirty buffer: pack_panels itself zeroes the last panel's missing rows and the padding.
  m.packed.assign(panel_bytes(rows, cols, dtype), 0xAB);
  m.panels = pack_panels(MatrixRef{m.stored.data(), dtype, rows, cols}, m.packed.data(), test_pool());
  return m;
}

std::vector<float> random_inputs(int64_t T, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(T * cols));
  for (auto& v : x) v = nd(rng);
  return x;
}

// The documented order: s = fma(w[r][k], x[k], s) for k in order, from +0.
float chain(const Matrix& m, int64_t r, const float* x) {
  float s = 0.0f;
  for (int64_t k = 0; k < m.cols; ++k) s = std::fma(m.values[r * m.cols + k], x[k], s);
  return s;
}

const DType kDtypes[] = {DType::F32, DType::F16, DType::BF16};

TEST(Panels, PackingPutsEveryElementWhereTheLayoutSaysAndZeroesThePadding) {
  // Partial panels of 5 and 12 rows (whole and partial squares of the SSE2 transpositions), column
  // counts below, between and past its squares and the packer's 64-column blocks, odd and even
  // (bf16's pairs).
  for (DType dtype : kDtypes)
    for (const auto [rows, cols] :
         {std::pair<int64_t, int64_t>{37, 5}, {44, 21}, {16, 70}, {19, 131}, {3, 1}}) {
      const Matrix m = make_matrix(dtype, rows, cols, 1);
      const size_t es = dtype_size(dtype);
      const int64_t padded = (rows + 15) / 16 * 16;
      // bf16: columns in pairs, an odd count padded with a zero column.
      const bool pairs = dtype == DType::BF16;
      const int64_t c = pairs ? (cols + 1) / 2 * 2 : cols;
      ASSERT_EQ(m.packed.size(), static_cast<size_t>(padded * c) * es);
      for (int64_t r = 0; r < padded; ++r)
        for (int64_t k = 0; k < c; ++k) {
          const int64_t in_panel =
              pairs ? k / 2 * 32 + (r % 16) * 2 + k % 2 : k * 16 + r % 16;
          const size_t at = static_cast<size_t>((r / 16) * 16 * c + in_panel) * es;
          std::vector<uint8_t> want(es, 0);
          if (r < m.rows && k < cols)
            std::memcpy(want.data(), m.stored.data() + static_cast<size_t>(r * m.cols + k) * es,
                        es);
          ASSERT_EQ(0, std::memcmp(m.packed.data() + at, want.data(), es))
              << rows << "x" << cols << " dtype " << static_cast<int>(dtype) << ": " << r << " "
              << k;
        }
    }
}

// Every ISA, every dtype, shapes with partial panels, partial tiles and several column blocks,
// GEMV and GEMM (through the in-place 16-bit tile and the widened one): each output is the chain,
// bit for bit, and within the chain's rounding bound of the double-precision sum. Outputs start
// as NaN, so one left unwritten fails.
TEST(Panels, EveryIsaGivesTheDocumentedChainExactlyAndTheDoubleSumToRounding) {
  struct Shape {
    int64_t rows, cols;
  };
  // 300 rows: GEMV blocks of 4 panels, so the GEMV's group of V::kPanelGemvPanels runs too. The
  // last shape spans two whole column blocks and a partial third, whatever kPanelColumnBlock is.
  const Shape shapes[] = {{1, 1},     {7, 3},    {16, 31}, {17, 256},
                          {40, 300},  {100, 600}, {300, 40}, {20, 2 * kPanelColumnBlock + 37}};
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    for (DType dtype : kDtypes)
      for (const Shape& s : shapes) {
        const Matrix m = make_matrix(dtype, s.rows, s.cols, 7);
        for (int64_t T : {1, 2, 5, 13, 27, 70}) {
          const std::vector<float> x = random_inputs(T, s.cols, 11);
          std::vector<float> y(static_cast<size_t>(T * s.rows), std::nanf(""));
          matmul_with(k, m.panels, x.data(), T, y.data(), test_pool());
          for (int64_t t = 0; t < T; ++t)
            for (int64_t r = 0; r < s.rows; ++r) {
              const float* xt = x.data() + t * s.cols;
              const float got = y[t * s.rows + r];
              ASSERT_EQ(bits_of(got), bits_of(chain(m, r, xt)))
                  << k.name << " dtype " << static_cast<int>(dtype) << " " << s.rows << "x"
                  << s.cols << " T " << T << " t " << t << " r " << r;
              double exact = 0, magnitude = 0;
              for (int64_t c = 0; c < s.cols; ++c) {
                const double p = double{m.values[r * s.cols + c]} * xt[c];
                exact += p;
                magnitude += std::fabs(p);
              }
              // |chain - sum| <= cols * eps * sum |w x| (each step rounds once, relative eps).
              ASSERT_LE(std::fabs(got - exact), 1.2e-7 * static_cast<double>(s.cols) * magnitude)
                  << k.name << " " << s.rows << "x" << s.cols << " T " << T;
            }
        }
      }
  }
}

// Row t of a GEMM is the GEMV of its input, with 1 and 2 threads alike, whatever its position;
// changing one input element changes that input's outputs only.
TEST(Panels, GemmRowsAreTheGemvWithAnyThreadsAndAChangedInputMovesOnlyItsOwnRow) {
  const int64_t rows = 200, cols = 520, T = 37;
  for (DType dtype : kDtypes) {
    const Matrix m = make_matrix(dtype, rows, cols, 3);
    std::vector<float> x = random_inputs(T, cols, 5);
    std::vector<float> y1(static_cast<size_t>(T * rows)), y2(y1.size()), g(rows);
    set_test_threads(1);
    matmul(m.panels, x.data(), T, y1.data(), test_pool());
    set_test_threads(2);
    matmul(m.panels, x.data(), T, y2.data(), test_pool());
    for (size_t i = 0; i < y1.size(); ++i) ASSERT_EQ(bits_of(y1[i]), bits_of(y2[i])) << i;
    for (int64_t t = 0; t < T; t += 6) {
      matmul(m.panels, x.data() + t * cols, 1, g.data(), test_pool());
      for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(bits_of(g[r]), bits_of(y2[t * rows + r]));
    }
    // One element of input 9 changed: its outputs move, the others keep their bits.
    x[9 * cols + 300] += 1.0f;
    matmul(m.panels, x.data(), T, y1.data(), test_pool());
    int moved = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const bool same = bits_of(y1[t * rows + r]) == bits_of(y2[t * rows + r]);
        if (t != 9) ASSERT_TRUE(same) << t << " " << r;
        moved += same ? 0 : 1;
      }
    EXPECT_GT(moved, rows / 2);
  }
  set_test_threads(0);
}

TEST(Panels, BadMatricesAndInputCountsAreRefusedBeforeAnythingIsWritten) {
  std::vector<float> w(32), x(4), y(8, 5.0f);
  EXPECT_THROW(panel_bytes(2, 2, DType::I8), InternalError);
  EXPECT_THROW(pack_panels(MatrixRef{w.data(), DType::F32, 0, 2}, w.data(), test_pool()),
               InternalError);
  const MatrixRef p{w.data(), DType::F32, 2, 2, MatrixLayout::kPanels};
  EXPECT_THROW(matmul(p, x.data(), 0, y.data(), test_pool()), InternalError);
  EXPECT_THROW(matmul(MatrixRef{w.data(), DType::I8, 2, 2, MatrixLayout::kPanels}, x.data(), 1, y.data(),
                             test_pool()),
               InternalError);
  for (float v : y) EXPECT_EQ(v, 5.0f);
}

}  // namespace
}  // namespace wick::kernels
