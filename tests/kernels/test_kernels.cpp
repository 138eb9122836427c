// Kernel checks against slow references: every instruction set's dot product (fp32/fp16/bf16,
// every tail length), the exact fp16 widening (subnormals included), GEMM rows vs GEMV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "kernels/wkv7.h"
#include "kernels/work_items.h"
#include "wick/errors.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

TEST(Kernels, F16WideningIsExactForEveryBitPattern) {
  // Reference: value = (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
  for (uint32_t h = 0; h < 65536; ++h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (e == 31) {
      EXPECT_TRUE(m ? std::isnan(got) : std::isinf(got)) << h;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1 + m / 1024.0, e - 15);
    const float want = static_cast<float>(s ? -mag : mag);
    ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "fp16 bits " << h;
  }
}

TEST(Kernels, DotProductsOfEveryIsaAgreeWithDoubleReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    for (size_t n : {1u, 3u, 15u, 16u, 17u, 31u, 64u, 65u, 100u, 768u, 1000u}) {
      std::vector<float> w(n), x(n);
      std::vector<uint16_t> wh(n), wb(n);
      for (size_t i = 0; i < n; ++i) {
        w[i] = nd(rng);
        x[i] = nd(rng);
        wb[i] = to_bf16(w[i]);
      }
      // fp16 weights: values exactly representable in fp16.
      for (size_t i = 0; i < n; ++i) {
        wh[i] = static_cast<uint16_t>(0x3000 + (i * 37) % 0x1800);
      }
      double rf = 0, rh = 0, rb = 0, mag = 0;
      for (size_t i = 0; i < n; ++i) {
        rf += double(w[i]) * x[i];
        rh += double(f16_to_f32(wh[i])) * x[i];
        rb += double(bf16_to_f32(wb[i])) * x[i];
        mag += std::abs(double(w[i]) * x[i]) + std::abs(double(f16_to_f32(wh[i])) * x[i]);
      }
      const double tol = 1e-6 * (mag + 1);
      EXPECT_NEAR(k.f32(w.data(), x.data(), n), rf, tol) << isa_name(isa) << " n=" << n;
      EXPECT_NEAR(k.f16(wh.data(), x.data(), n), rh, tol) << isa_name(isa) << " n=" << n;
      EXPECT_NEAR(k.bf16(wb.data(), x.data(), n), rb, tol) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(Kernels, GemmRowsAreBitIdenticalToGemv) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  const int64_t rows = 300, cols = 129, T = 7;  // large enough to take the threaded path
  std::vector<float> w(rows * cols), x(T * cols);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  MatrixRef ref{w.data(), DType::F32, rows, cols};
  std::vector<float> y(T * rows), y1(rows);
  matmul(ref, x.data(), T, y.data(), test_pool());
  for (int64_t t = 0; t < T; ++t) {
    matmul(ref, x.data() + t * cols, 1, y1.data(), test_pool());
    EXPECT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * 4), 0) << t;
  }
  // and a different input gives a different output
  x[0] += 1.f;
  matmul(ref, x.data(), 1, y1.data(), test_pool());
  EXPECT_NE(std::memcmp(y1.data(), y.data(), rows * 4), 0);
}

// Every ISA's row-group kernels follow its dot product's summation order exactly: the multi-row
// GEMV, the GEMM tile over widened rows and the widening itself. Every output starts as NaN, so a
// kernel that leaves one unwritten fails too (n = 0 included, where each output is +0).
TEST(Kernels, RowKernelsOfEveryIsaAreBitIdenticalToTheirDot) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const auto unset = [](std::vector<float>& v) { std::fill(v.begin(), v.end(), std::nanf("")); };
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    for (size_t n : {0u, 1u, 7u, 8u, 17u, 64u, 100u}) {
      const int nr = 11, nt = 9;
      std::vector<float> w(nr * n), x(nt * n);
      for (auto& v : w) v = nd(rng);
      for (auto& v : x) v = nd(rng);
      std::vector<uint16_t> wh(w.size()), wb(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        uint32_t u;
        std::memcpy(&u, &w[i], 4);
        wb[i] = static_cast<uint16_t>(u >> 16);
        wh[i] = static_cast<uint16_t>(0x3000 + (u & 0x7ff));
      }
      std::vector<float> y(nr), yt(nt * nr), widened(w.size());
      unset(y);
      k.gemv_bf16(wb.data(), n, x.data(), n, nr, y.data());
      for (int r = 0; r < nr; ++r) EXPECT_EQ(y[r], k.bf16(wb.data() + r * n, x.data(), n)) << r;
      unset(y);
      k.gemv_f16(wh.data(), n, x.data(), n, nr, y.data());
      for (int r = 0; r < nr; ++r) EXPECT_EQ(y[r], k.f16(wh.data() + r * n, x.data(), n)) << r;
      unset(y);
      k.gemv_f32(w.data(), n, x.data(), n, nr, y.data());
      for (int r = 0; r < nr; ++r) EXPECT_EQ(y[r], k.f32(w.data() + r * n, x.data(), n)) << r;
      k.widen_bf16(wb.data(), widened.data(), w.size());
      for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(widened[i], bf16_to_f32(wb[i]));
      k.widen_f16(wh.data(), widened.data(), w.size());
      for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(widened[i], f16_to_f32(wh[i]));
      for (int tr = 1; tr <= k.tile_rows; ++tr)
        for (int ti = 1; ti <= k.tile_inputs; ++ti) {
          unset(yt);
          k.gemm_tile(w.data(), n, x.data(), n, n, tr, ti, yt.data(), nr, nullptr);
          for (int t = 0; t < ti; ++t)
            for (int r = 0; r < tr; ++r)
              ASSERT_EQ(yt[t * nr + r], k.f32(w.data() + r * n, x.data() + t * n, n))
                  << isa_name(isa) << " n=" << n << " tile " << tr << "x" << ti;
          // The 16-bit tiles read the rows in place: the dot of each dtype, bit for bit (with a
          // prefetch target, the rows themselves, which changes nothing).
          unset(yt);
          k.gemm_tile_bf16(wb.data(), n, x.data(), n, n, tr, ti, yt.data(), nr, wb.data());
          for (int t = 0; t < ti; ++t)
            for (int r = 0; r < tr; ++r)
              ASSERT_EQ(yt[t * nr + r], k.bf16(wb.data() + r * n, x.data() + t * n, n))
                  << isa_name(isa) << " bf16 n=" << n << " tile " << tr << "x" << ti;
          unset(yt);
          k.gemm_tile_f16(wh.data(), n, x.data(), n, n, tr, ti, yt.data(), nr, wh.data());
          for (int t = 0; t < ti; ++t)
            for (int r = 0; r < tr; ++r)
              ASSERT_EQ(yt[t * nr + r], k.f16(wh.data() + r * n, x.data() + t * n, n))
                  << isa_name(isa) << " f16 n=" << n << " tile " << tr << "x" << ti;
        }
    }
  }
}

// GEMM rows equal the GEMV for every dtype, across input blocks, with 1, 2, 3 or 5 threads (the
// GEMV's blocks of rows depend on the thread count: kernels/work_items.h).
TEST(Kernels, MatmulIsBitIdenticalAcrossPassesDtypesAndThreadCounts) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const int64_t rows = 203, cols = 136, T = 101;
  std::vector<float> w(rows * cols), x(T * cols);
  for (auto& v : w) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  std::vector<uint16_t> wb(w.size()), wh(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &w[i], 4);
    wb[i] = static_cast<uint16_t>(u >> 16);
    wh[i] = static_cast<uint16_t>(0x3000 + (u & 0x7ff));
  }
  // fp16 / bf16 rows take both GEMM paths here (kernels/work_items.h widen_rows_first): widened
  // into an fp32 block at 1 thread (one span of all 101 inputs per item), read in place by the
  // 16-bit tile at 5 (spans of 51).
  const int64_t tile_inputs = dot_kernels().tile_inputs;
  const auto span = [&](int threads) {
    return work::gemm_items(rows, T, dot_kernels().tile_rows, cols * 4, threads).span;
  };
  ASSERT_TRUE(work::widen_rows_first(span(1), cols, tile_inputs));
  ASSERT_FALSE(work::widen_rows_first(span(5), cols, tile_inputs));
  std::vector<float> first;
  for (int threads : {1, 2, 3, 5}) {
    set_test_threads(threads);
    for (auto ref : {MatrixRef{w.data(), DType::F32, rows, cols},
                     MatrixRef{wb.data(), DType::BF16, rows, cols},
                     MatrixRef{wh.data(), DType::F16, rows, cols}}) {
      std::vector<float> y(T * rows), y1(rows);
      matmul(ref, x.data(), T, y.data(), test_pool());
      for (int64_t t = 0; t < T; t += 10) {
        matmul(ref, x.data() + t * cols, 1, y1.data(), test_pool());
        ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * 4), 0) << t;
      }
      if (ref.dtype == DType::BF16) {
        if (first.empty()) first = y;
        else EXPECT_EQ(first, y);  // the same bits with any thread count
      }
    }
  }
  // The comparisons above can fail: one changed input element changes that input's outputs and
  // no other's.
  std::vector<float> x2 = x, y2(T * rows);
  x2[0] += 1.0f;
  matmul(MatrixRef{wb.data(), DType::BF16, rows, cols}, x2.data(), T, y2.data(), test_pool());
  EXPECT_NE(std::memcmp(y2.data(), first.data(), rows * 4), 0);
  EXPECT_EQ(std::memcmp(y2.data() + rows, first.data() + rows, (T - 1) * rows * 4), 0);
  set_test_threads(0);
}

// Products run as one pool job (matmul_all: the time mix's r/k/v and LoRA factors) give each
// output bit for bit what matmul() of that product alone gives: mixed dtypes and shapes (one below
// the size that goes parallel alone), at decode (T = 1), a batch of 7 rows, a prompt of 40 and one
// of 100 (whose work items also split the inputs into spans), with 1, 2 or 3 threads.
TEST(Kernels, MatmulAllEqualsEachProductAlone) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd;
  struct Shape {
    DType dtype;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{DType::BF16, 64, 136}, {DType::F32, 203, 136}, {DType::F16, 17, 40},
                          {DType::BF16, 300, 64}, {DType::F32, 9, 200}};
  constexpr int64_t kMaxT = 100;
  std::vector<std::vector<uint16_t>> half(std::size(shapes));
  std::vector<std::vector<float>> full(std::size(shapes)), xs(std::size(shapes));
  std::vector<MatrixRef> refs;
  for (size_t i = 0; i < std::size(shapes); ++i) {
    const Shape& s = shapes[i];
    full[i].resize(static_cast<size_t>(s.rows * s.cols));
    for (auto& v : full[i]) v = nd(rng);
    const void* data = full[i].data();
    if (s.dtype != DType::F32) {
      for (float v : full[i]) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        half[i].push_back(s.dtype == DType::BF16 ? static_cast<uint16_t>(u >> 16)
                                                 : static_cast<uint16_t>(0x3000 + (u & 0x7ff)));
      }
      data = half[i].data();
    }
    refs.push_back(MatrixRef{data, s.dtype, s.rows, s.cols});
    xs[i].resize(static_cast<size_t>(kMaxT * s.cols));
    for (auto& v : xs[i]) v = nd(rng);
  }
  for (int threads : {1, 2, 3}) {
    set_test_threads(threads);
    for (int64_t T : {int64_t{1}, int64_t{7}, int64_t{40}, kMaxT}) {
      std::vector<std::vector<float>> alone(refs.size()), together(refs.size());
      std::vector<MatmulCall> calls;
      for (size_t i = 0; i < refs.size(); ++i) {
        alone[i].assign(static_cast<size_t>(T * refs[i].rows), 0.f);
        together[i].assign(alone[i].size(), -1.f);
        matmul(refs[i], xs[i].data(), T, alone[i].data(), test_pool());
        calls.push_back({refs[i], xs[i].data(), together[i].data()});
      }
      matmul_all(calls, T, test_pool());
      for (size_t i = 0; i < refs.size(); ++i)
        ASSERT_EQ(std::memcmp(alone[i].data(), together[i].data(), alone[i].size() * 4), 0)
            << "product " << i << ", T = " << T << ", threads " << threads;
      // The comparison can fail: another input for product 1 changes its outputs and no other's.
      std::vector<float> x2 = xs[1];
      x2[0] += 1.f;
      calls[1].x = x2.data();
      matmul_all(calls, T, test_pool());
      EXPECT_NE(std::memcmp(alone[1].data(), together[1].data(), alone[1].size() * 4), 0);
      EXPECT_EQ(std::memcmp(alone[0].data(), together[0].data(), alone[0].size() * 4), 0);
    }
  }
  set_test_threads(0);
  // As many products as one job takes run (each into its own y); one more, or a matrix of another
  // dtype, is a bug in the caller, caught before any product runs.
  std::vector<std::vector<float>> ys(kMaxMatmulCalls + 1,
                                     std::vector<float>(static_cast<size_t>(refs[2].rows), -1.f));
  std::vector<MatmulCall> most;
  for (size_t i = 0; i < kMaxMatmulCalls; ++i) most.push_back({refs[2], xs[2].data(), ys[i].data()});
  matmul_all(most, 1, test_pool());
  std::vector<float> y2(ys[0].size());
  matmul(refs[2], xs[2].data(), 1, y2.data(), test_pool());
  EXPECT_EQ(ys[kMaxMatmulCalls - 1], y2);
  for (auto& y : ys) std::fill(y.begin(), y.end(), -1.f);
  most.push_back({refs[2], xs[2].data(), ys[kMaxMatmulCalls].data()});
  EXPECT_THROW(matmul_all(most, 1, test_pool()), InternalError);
  const MatmulCall wrong_dtype[] = {{refs[2], xs[2].data(), ys[0].data()},
                                    {MatrixRef{refs[2].data, DType::I8, refs[2].rows, refs[2].cols},
                                     xs[2].data(), ys[1].data()}};
  EXPECT_THROW(matmul_all(wrong_dtype, 1, test_pool()), InternalError);
  for (const auto& y : ys) EXPECT_EQ(y, std::vector<float>(y.size(), -1.f));  // nothing ran
}

// Several sequences at once (batched decode and prefill): every segment's state and outputs are
// bit for bit those of wkv7_token applied to that segment's tokens one after another (the kernel
// the formula tests check), on the parallel path (enough work in all segments together: 17 tokens
// x C x N = 278528 >= the 2^18 of kernels/wkv7.cpp) and the inline one (one segment of one
// token); a changed input of one segment changes only that segment's outputs.
TEST(Kernels, Wkv7SegmentsEqualEachSequenceAlone) {
  const int H = 4, N = 64, C = H * N;
  const std::vector<int64_t> lengths = {1, 1, 3, 1, 7, 1, 1, 2};
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> ud(-1, 1);
  int64_t total = 0;
  for (int64_t T : lengths) total += T;
  std::vector<float> r(total * C), w(total * C), k(total * C), v(total * C), kk(total * C),
      a(total * C);
  for (int64_t i = 0; i < total * C; ++i) {
    r[i] = ud(rng);
    w[i] = 0.6f + 0.2f * (ud(rng) + 1);
    k[i] = ud(rng);
    v[i] = ud(rng);
    kk[i] = ud(rng) / 8;
    a[i] = (ud(rng) + 1) / 2;
  }
  const size_t state = static_cast<size_t>(H) * N * N;
  std::vector<float> S0(lengths.size() * state);
  for (auto& x : S0) x = ud(rng);
  // Segments [first, first + count) through wkv7_segments.
  auto run_segments = [&](size_t first, size_t count, const std::vector<float>& rr,
                          std::vector<float>& S, std::vector<float>& y) {
    std::vector<kernels::Wkv7Segment> segs;
    int64_t row = 0;
    for (size_t i = 0; i < first + count; ++i) {
      const int64_t o = row * C;
      if (i >= first)
        segs.push_back({lengths[i], S.data() + i * state, rr.data() + o, w.data() + o,
                        k.data() + o, v.data() + o, kk.data() + o, a.data() + o, y.data() + o});
      row += lengths[i];
    }
    kernels::wkv7_segments(segs.data(), static_cast<int64_t>(count), H, N, test_pool());
  };
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  // The reference: each segment's tokens through wkv7_token, in order.
  std::vector<float> S_ref = S0, y_ref(total * C);
  for (size_t i = 0, row = 0; i < lengths.size(); ++i)
    for (int64_t t = 0; t < lengths[i]; ++t, ++row) {
      const int64_t o = static_cast<int64_t>(row) * C;
      kernels::wkv7_token(H, N, S_ref.data() + i * state, r.data() + o, w.data() + o, k.data() + o,
                          v.data() + o, kk.data() + o, a.data() + o, y_ref.data() + o);
    }
  // 3 threads: blocks of neighbouring pairs (2 per thread) that do not divide the 32 pairs evenly.
  for (int threads : {1, 2, 3}) {
    set_test_threads(threads);
    std::vector<float> S = S0, y(total * C);
    run_segments(0, lengths.size(), r, S, y);
    EXPECT_TRUE(same_bits(S, S_ref));
    EXPECT_TRUE(same_bits(y, y_ref));
    EXPECT_FALSE(same_bits(S, S0));
    std::vector<float> S1 = S0, y1(total * C);  // one segment per call: the inline path
    for (size_t i = 0; i < lengths.size(); ++i) run_segments(i, 1, r, S1, y1);
    EXPECT_TRUE(same_bits(S1, S_ref));
    EXPECT_TRUE(same_bits(y1, y_ref));
    // The first segment's first input changed: its outputs move, every other segment's stay.
    std::vector<float> r2 = r, S2 = S0, y2(total * C);
    r2[0] += 0.5f;
    run_segments(0, lengths.size(), r2, S2, y2);
    EXPECT_NE(std::memcmp(y2.data(), y.data(), C * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(y2.data() + C, y.data() + C, (total - 1) * C * sizeof(float)), 0);
  }
  set_test_threads(0);
}

TEST(Kernels, Wkv7TokenMatchesTheFormulaInDouble) {
  const int H = 2, N = 4, C = H * N;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-1, 1);
  std::vector<float> S(H * N * N), r(C), w(C), k(C), v(C), kk(C), a(C), y(C);
  for (auto& s : S) s = ud(rng);
  for (int c = 0; c < C; ++c) {
    r[c] = ud(rng);
    w[c] = 0.6f + 0.3f * (ud(rng) + 1) / 2;
    k[c] = ud(rng);
    v[c] = ud(rng);
    kk[c] = ud(rng);
    a[c] = (ud(rng) + 1) / 2;
  }
  std::vector<double> Sd(S.begin(), S.end());
  wkv7_token(H, N, S.data(), r.data(), w.data(), k.data(), v.data(), kk.data(), a.data(), y.data());
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < N; ++i) {
      double sa = 0;
      for (int j = 0; j < N; ++j) sa += Sd[(h * N + i) * N + j] * -kk[h * N + j];
      double yi = 0;
      for (int j = 0; j < N; ++j) {
        const int c = h * N + j;
        const double s = Sd[(h * N + i) * N + j] * w[c] + sa * kk[c] * a[c] + double(v[h * N + i]) * k[c];
        EXPECT_NEAR(S[(h * N + i) * N + j], s, 1e-6);
        yi += s * r[c];
      }
      EXPECT_NEAR(y[h * N + i], yi, 1e-6);
    }
  }
}

// Every instruction set's head kernel at the released head size (64) and at 8 / 24 (AVX2 only,
// scalar elsewhere), 24 tokens in a row, against the same update in double; a different input
// gives a different state.
TEST(Kernels, Wkv7HeadKernelsMatchTheFormulaInDouble) {
  for (const int N : {64, 8, 24}) {
    for (const Isa isa : isas_of_this_cpu()) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " N=" + std::to_string(N));
      const Wkv7HeadFn head = wkv7_head_kernel(isa, N);
      std::mt19937 rng(29);
      std::uniform_real_distribution<float> ud(-1, 1);
      std::vector<float> S(N * N), r(N), w(N), k(N), v(N), kk(N), a(N), y(N);
      for (auto& s : S) s = 0.1f * ud(rng);
      std::vector<double> Sd(S.begin(), S.end()), yd(N);
      double worst = 0;
      for (int t = 0; t < 24; ++t) {
        double norm = 0;
        for (int j = 0; j < N; ++j) {
          r[j] = ud(rng), w[j] = 0.6f + 0.39f * (ud(rng) + 1) / 2, k[j] = 0.3f * ud(rng);
          v[j] = ud(rng), kk[j] = ud(rng), a[j] = (ud(rng) + 1) / 2;
          norm += double(kk[j]) * kk[j];
        }
        for (int j = 0; j < N; ++j) kk[j] = static_cast<float>(kk[j] / std::sqrt(norm));
        head(N, S.data(), r.data(), w.data(), k.data(), v.data(), kk.data(), a.data(), y.data());
        for (int i = 0; i < N; ++i) {
          double sa = 0, yi = 0;
          for (int j = 0; j < N; ++j) sa += Sd[i * N + j] * -double(kk[j]);
          for (int j = 0; j < N; ++j) {
            double& s = Sd[i * N + j];
            s = s * w[j] + sa * (double(kk[j]) * a[j]) + double(v[i]) * k[j];
            yi += s * r[j];
          }
          worst = std::max(worst, std::abs(yi - y[i]));
        }
      }
      for (int e = 0; e < N * N; ++e) worst = std::max(worst, std::abs(Sd[e] - S[e]));
      EXPECT_LT(worst, 2e-5);
      // A different value vector: a different state.
      std::vector<float> S2 = S;
      v[0] += 0.5f;
      head(N, S.data(), r.data(), w.data(), k.data(), v.data(), kk.data(), a.data(), y.data());
      v[0] -= 0.5f;
      head(N, S2.data(), r.data(), w.data(), k.data(), v.data(), kk.data(), a.data(), y.data());
      EXPECT_NE(S, S2);
    }
  }
}

}  // namespace
}  // namespace wick::kernels
