// The lane-major GEMM of decoded rows (kernels/matmul.h matmul_decoded on an ISA with
// DotKernels::reduce_lanes): the lane-major panel packing against its formula (kernels/panels.h),
// reduce_lanes against the lane tree the dot itself takes, and matmul_decoded's rows against the
// row-major dot of the decoded row, bit for bit, for every ISA of this CPU, 1 and 2 threads and
// shapes whose columns are no multiple of the lanes (the zero-padded last chunk); a changed input
// element moves its own input's outputs only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "test_util.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/panels.h"
#include "kernels/thread_pool.h"
#include "wick/errors.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

// Values of both signs over 2^-8 .. 2^8 (never zero), so a changed order of additions rounds
// differently somewhere.
std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& f : v) {
    const float m = 1.0f + static_cast<float>(rng() % 4096) / 4096.0f;
    const int e = static_cast<int>(rng() % 17) - 8;
    f = std::ldexp(rng() % 2 ? -m : m, e);
  }
  return v;
}

// The packers of lane-major panels to test: the generic packing at 8 and 16 lanes, and each ISA's
// transposition of whole chunks (DotKernels::transpose_lanes) at its own lane count.
std::vector<std::pair<int, TransposeLanes>> lane_major_packers() {
  std::vector<std::pair<int, TransposeLanes>> packers = {{8, nullptr}, {16, nullptr}};
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    if (k.transpose_lanes != nullptr) packers.emplace_back(k.lanes, k.transpose_lanes);
  }
  return packers;
}

TEST(LaneMajor, PackingPutsEveryElementWhereTheLayoutSaysAndZeroesTheRest) {
  for (Isa isa : isas_of_this_cpu())
    if (isa == Isa::kAvx512) EXPECT_NE(dot_kernels_for(isa).transpose_lanes, nullptr);
  for (const auto [lanes, transpose] : lane_major_packers()) {
    for (size_t n : {size_t{1}, size_t{5}, size_t{16}, size_t{37}, size_t{64}, size_t{515}}) {
      for (int64_t nr : {int64_t{16}, int64_t{5}, int64_t{3}}) {
        const size_t stride = n + 3;
        const std::vector<float> rows = random_values(16 * stride, 11);
        const auto l = static_cast<size_t>(lanes);
        const auto chunks = static_cast<size_t>(lane_major_chunks(static_cast<int64_t>(n), lanes));
        const auto s = static_cast<size_t>(lane_major_stride(static_cast<int64_t>(n), lanes));
        ASSERT_EQ(chunks, (n + l - 1) / l);
        ASSERT_GT(s, chunks);
        std::vector<float> dst(16 * l * s, std::numeric_limits<float>::quiet_NaN());
        pack_lane_major_panel(rows.data(), stride, nr, n, lanes, dst.data(), transpose);
        for (size_t j = 0; j < l; ++j)
          for (size_t c = 0; c < s; ++c)
            for (size_t i = 0; i < 16; ++i) {
              const size_t k = c * l + j;
              const bool held = c < chunks && k < n && static_cast<int64_t>(i) < nr;
              const float want = held ? rows[i * stride + k] : 0.0f;
              ASSERT_EQ(bits_of(dst[(j * s + c) * 16 + i]), bits_of(want))
                  << "lanes " << lanes << (transpose ? " (ISA transposition)" : "") << " n " << n
                  << " nr " << nr << " lane " << j << " chunk " << c << " row " << i;
            }
      }
    }
  }
  std::vector<float> rows(64), dst(1024);
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 4, 0, 4, 8, dst.data()), InternalError);
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 4, 2, 4, 8, dst.data(), nullptr, 3, 3),
               InternalError);  // an empty range of columns
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 2, 2, 8, 8, dst.data(), nullptr, 0, 3),
               InternalError);  // a row_stride below the range's width
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 4, 17, 4, 8, dst.data()), InternalError);
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 4, 2, 4, 12, dst.data()), InternalError);
  EXPECT_THROW(pack_lane_major_panel(rows.data(), 3, 2, 4, 8, dst.data()), InternalError);
}

// A panel packed a range of columns at a time (kernels/matmul.cpp decodes a block of columns of
// the panel's rows at once, rows then holding only that block) is the panel packed whole, bit for
// bit - blocks that begin and end inside a chunk and inside a group of 4 lanes included, with and
// without the ISA's transposition, full and partial panels.
TEST(LaneMajor, PackingByBlocksOfColumnsIsPackingWhole) {
  for (const auto [lanes, transpose] : lane_major_packers()) {
    for (size_t n : {size_t{37}, size_t{515}, size_t{2051}}) {
      for (size_t block : {size_t{1}, size_t{3}, size_t{16}, size_t{50}, size_t{256}}) {
        for (int64_t nr : {int64_t{16}, int64_t{7}}) {
          const size_t stride = n + 5;
          const std::vector<float> rows = random_values(16 * stride, 13);
          const auto s = static_cast<size_t>(lane_major_stride(static_cast<int64_t>(n), lanes));
          const size_t size = 16 * static_cast<size_t>(lanes) * s;
          std::vector<float> whole(size, std::numeric_limits<float>::quiet_NaN());
          std::vector<float> blocks(size, std::numeric_limits<float>::quiet_NaN());
          pack_lane_major_panel(rows.data(), stride, nr, n, lanes, whole.data(), transpose);
          std::vector<float> piece(16 * (block + 1));
          for (size_t k0 = 0; k0 < n; k0 += block) {
            const size_t k1 = std::min(n, k0 + block);
            for (size_t i = 0; i < 16; ++i)  // rows of just this block, block + 1 apart
              std::copy(rows.begin() + static_cast<ptrdiff_t>(i * stride + k0),
                        rows.begin() + static_cast<ptrdiff_t>(i * stride + k1),
                        piece.begin() + static_cast<ptrdiff_t>(i * (block + 1)));
            pack_lane_major_panel(piece.data(), block + 1, nr, n, lanes, blocks.data(), transpose,
                                  k0, k1);
          }
          for (size_t e = 0; e < size; ++e)
            ASSERT_EQ(bits_of(blocks[e]), bits_of(whole[e]))
                << "lanes " << lanes << (transpose ? " (ISA transposition)" : "") << " n " << n
                << " block " << block << " nr " << nr << " element " << e;
          // A different element of the rows lands in the whole panel (the two packings are not
          // equal for want of reading the rows).
          std::vector<float> changed = rows;
          changed[n - 1] *= 3.0f;
          std::vector<float> other(size);
          pack_lane_major_panel(changed.data(), stride, nr, n, lanes, other.data(), transpose);
          EXPECT_NE(other, whole);
        }
      }
    }
  }
}

TEST(LaneMajor, InputsGoWhereTheirLanesColumnsAre) {
  std::vector<float> in(8), out(64);
  EXPECT_THROW(lane_major_inputs(in.data(), 8, 12, out.data()), InternalError);
  EXPECT_THROW(lane_major_inputs(in.data(), 8, 2, out.data()), InternalError);
  for (int lanes : {4, 8, 16}) {
    for (size_t n : {size_t{1}, size_t{5}, size_t{16}, size_t{37}, size_t{64}, size_t{515}}) {
      const std::vector<float> x = random_values(n, 12);
      const auto l = static_cast<size_t>(lanes);
      const auto s = static_cast<size_t>(lane_major_stride(static_cast<int64_t>(n), lanes));
      std::vector<float> dst(l * s, std::numeric_limits<float>::quiet_NaN());
      lane_major_inputs(x.data(), n, lanes, dst.data());
      for (size_t j = 0; j < l; ++j)
        for (size_t c = 0; c < s; ++c) {
          const size_t k = c * l + j;
          ASSERT_EQ(bits_of(dst[j * s + c]), bits_of(k < n ? x[k] : 0.0f))
              << "lanes " << lanes << " n " << n << " lane " << j << " chunk " << c;
        }
    }
  }
}

// reduce_lanes(p)[i] is the dot's tree over p's column i: the dot of those lanes' values with
// ones (one chunk, so each lane holds fma(v, 1, +0) = v) adds them in the order it adds its
// accumulator's lanes. Scalar, whose multiply-adds are not fused, has none.
TEST(LaneMajor, ReduceLanesAddsTheLanesAsTheDotDoes) {
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    if (isa == Isa::kScalar) {
      EXPECT_EQ(k.reduce_lanes, nullptr);
      continue;
    }
    ASSERT_NE(k.reduce_lanes, nullptr) << isa_name(isa);
    const auto l = static_cast<size_t>(k.lanes);
    for (size_t count : {size_t{1}, l - 1, l, l + 3, 3 * l + 5}) {
      const size_t stride = count + 2;
      std::vector<float> p = random_values(l * stride, static_cast<uint32_t>(count));
      std::vector<float> y(count), y2(count), lanes(l), ones(l, 1.0f);
      k.reduce_lanes(p.data(), stride, count, y.data());
      for (size_t i = 0; i < count; ++i) {
        for (size_t j = 0; j < l; ++j) lanes[j] = p[j * stride + i];
        ASSERT_EQ(bits_of(y[i]), bits_of(k.f32(lanes.data(), ones.data(), l)))
            << isa_name(isa) << " count " << count << " i " << i;
      }
      // A changed lane of column 0 moves y[0] only.
      p[(l - 1) * stride] *= 3.0f;
      k.reduce_lanes(p.data(), stride, count, y2.data());
      EXPECT_NE(bits_of(y2[0]), bits_of(y[0]));
      for (size_t i = 1; i < count; ++i) ASSERT_EQ(bits_of(y2[i]), bits_of(y[i]));
    }
  }
}

// A DecodedMatrix over plain fp32 rows (the decoder copies them).
struct Fp32Rows {
  std::vector<float> w;
  int64_t rows, cols;
  int64_t col_block = 1;
  DecodedMatrix view() const {
    DecodedMatrix d;
    d.decode = [](const void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* dst) {
      const auto* m = static_cast<const Fp32Rows*>(ctx);
      for (int64_t r = r0; r < r1; ++r, dst += c1 - c0)
        std::copy(m->w.begin() + r * m->cols + c0, m->w.begin() + r * m->cols + c1, dst);
    };
    d.ctx = this;
    d.rows = rows;
    d.cols = cols;
    d.col_block = col_block;
    return d;
  }
};

// Shapes on both sides of decoded_gemm_lane_major: small ones (the row-major tile) and long rows
// with many inputs (lane-major on AVX2 / AVX-512), among them columns that are no multiple of
// the lanes and rows that are no multiple of the panels'. The decoder's unit of columns
// (col_block) sets the blocks the lane-major path decodes at once: 1 (blocks of 256, a partial
// last one), 512 (blocks of 512), 100 (200 columns, no multiple of the lanes: whole rows) and
// the whole row.
TEST(LaneMajor, DecodedGemmRowsAreTheRowMajorDotForEveryIsaAndThreadCount) {
  struct Shape {
    int64_t rows, cols, T;
    bool lane_major;  // on an ISA with reduce_lanes
    int64_t col_block = 1;
  };
  for (const Shape sh : {Shape{1, 1, 2, false}, Shape{5, 7, 3, false}, Shape{45, 100, 9, false},
                         Shape{50, 2051, 40, false}, Shape{300, 2051, 64, true},
                         Shape{256, 2048, 70, true}, Shape{261, 8200, 65, true},
                         Shape{256, 2048, 64, true, 512}, Shape{260, 2100, 64, true, 100},
                         Shape{256, 2048, 64, true, 2048}}) {
    Fp32Rows m{random_values(static_cast<size_t>(sh.rows * sh.cols), 3), sh.rows, sh.cols,
               sh.col_block};
    std::vector<float> x = random_values(static_cast<size_t>(sh.T * sh.cols), 4);
    // Signed zeros among the weights and inputs, and (with 2 rows or more) the last row all -0:
    // a chain from +0 never becomes -0; a path that started from -0 or multiplied before its
    // first add would show it here.
    for (size_t i = 5; i < m.w.size(); i += 13) m.w[i] = i % 2 ? -0.0f : 0.0f;
    for (size_t i = 5; i < x.size(); i += 11) x[i] = -0.0f;
    if (sh.rows > 1)
      std::fill(m.w.end() - sh.cols, m.w.end(), -0.0f);
    const size_t outputs = static_cast<size_t>(sh.T * sh.rows);
    for (Isa isa : isas_of_this_cpu()) {
      const DotKernels& k = dot_kernels_for(isa);
      ASSERT_EQ(decoded_gemm_lane_major(k, sh.rows, sh.cols, sh.T),
                sh.lane_major && isa != Isa::kScalar)
          << isa_name(isa) << " " << sh.rows << " x " << sh.cols << " T " << sh.T;
      std::vector<float> y1(outputs), y2(outputs);
      set_test_threads(1);
      matmul_decoded(m.view(), x.data(), sh.T, y1.data(), k, test_pool());
      set_test_threads(2);
      matmul_decoded(m.view(), x.data(), sh.T, y2.data(), k, test_pool());
      for (int64_t t = 0; t < sh.T; ++t)
        for (int64_t o = 0; o < sh.rows; ++o) {
          const float want = k.f32(m.w.data() + o * sh.cols, x.data() + t * sh.cols,
                                   static_cast<size_t>(sh.cols));
          const size_t at = static_cast<size_t>(t * sh.rows + o);
          ASSERT_EQ(bits_of(y1[at]), bits_of(want)) << isa_name(isa) << " " << sh.rows << " x "
                                                    << sh.cols << " t " << t << " o " << o;
          ASSERT_EQ(bits_of(y2[at]), bits_of(want)) << isa_name(isa) << " 2 threads";
        }
      // One element of the last input changed: its outputs move, the others keep their bits.
      std::vector<float> x2 = x;
      x2[static_cast<size_t>((sh.T - 1) * sh.cols + sh.cols / 2)] += 1.0f;
      std::vector<float> y3(outputs);
      matmul_decoded(m.view(), x2.data(), sh.T, y3.data(), k, test_pool());
      int moved = 0;
      for (size_t i = 0; i < outputs; ++i) {
        const bool same = bits_of(y3[i]) == bits_of(y2[i]);
        if (i < static_cast<size_t>((sh.T - 1) * sh.rows)) ASSERT_TRUE(same) << i;
        moved += same ? 0 : 1;
      }
      EXPECT_GT(moved, 0) << isa_name(isa);
    }
  }
  set_test_threads(0);
  // A col_block that does not divide the columns is refused.
  Fp32Rows bad{random_values(64 * 2048, 5), 64, 2048, 300};
  std::vector<float> x(64 * 2048, 1.0f), y(64 * 64);
  EXPECT_THROW(matmul_decoded(bad.view(), x.data(), 64, y.data(), dot_kernels(), test_pool()),
               InternalError);
}

}  // namespace
}  // namespace wick::kernels
