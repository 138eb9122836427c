// Kernel benchmarks (performance only; correctness lives in tests/kernels). GEMV at the shapes of
// the 0.1B geometry (C = 768, F = 3072, V = 65536) in each weight dtype, reported as weight bytes
// read per second so they can be judged against the read bandwidth measured in the same run
// (BM_ReadBandwidth: both threads, 8 vector accumulators each, 1 GiB); the GEMM of the
// parallel pass next to the machine's fp32 FMA peak (BM_FmaPeak); the WKV-7 recurrence. The
// INT8 GEMV of `--quantize int8` (kernels/int8_matmul.h) at the same shapes, per kernel (scalar
// reference, AVX2, AVX-512 VNNI - skipped where the CPU lacks it), bytes = codes + scales read.
//   build/bench/bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <unistd.h>

#include "kernels/cpu_features.h"
#include "kernels/int8_matmul.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/matmul.h"
#include "kernels/wkv7.h"
#include "bench_pool.h"

namespace {

using wick::DType;
using wick::kernels::MatrixRef;

struct Matrix {
  std::vector<uint8_t> bytes;
  MatrixRef ref;
};

Matrix make_matrix(DType dt, int64_t rows, int64_t cols) {
  Matrix m;
  const size_t es = wick::dtype_size(dt);
  m.bytes.resize(rows * cols * es);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> ud(-0.05f, 0.05f);
  for (int64_t i = 0; i < rows * cols; ++i) {
    float f = ud(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (dt == DType::F32) std::memcpy(&m.bytes[i * 4], &f, 4);
    if (dt == DType::BF16) {
      uint16_t b = static_cast<uint16_t>(u >> 16);
      std::memcpy(&m.bytes[i * 2], &b, 2);
    }
    if (dt == DType::F16) {
      uint16_t h = static_cast<uint16_t>(0x2000 + (i % 0x1000));  // small normal fp16 values
      std::memcpy(&m.bytes[i * 2], &h, 2);
    }
  }
  m.ref = MatrixRef{m.bytes.data(), dt, rows, cols};
  return m;
}

void BM_Gemv(benchmark::State& state, DType dt) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Matrix m = make_matrix(dt, rows, cols);
  std::vector<float> x(cols, 0.5f), y(rows);
  for (auto _ : state) {
    wick::kernels::matmul(m.ref, x.data(), 1, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(m.bytes.size()));
}

void BM_Gemm(benchmark::State& state, DType dt) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  Matrix m = make_matrix(dt, rows, cols);
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  for (auto _ : state) {
    wick::kernels::matmul(m.ref, x.data(), T, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
}

// The GEMV as decode sees it: the weights come from DRAM, not cache. Cycles through enough
// distinct matrices of one shape (>= 256 MiB in all, and at least twice the L3 the C library
// reports: 480 MiB on the Xeon this was last measured on) that every call streams its matrix from
// memory; bytes/s is to be judged against BM_ReadBandwidth.
void BM_GemvFromMemory(benchmark::State& state, DType dt) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const int64_t bytes = rows * cols * static_cast<int64_t>(wick::dtype_size(dt));
  const int64_t l3 = std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
  const int64_t total = std::max<int64_t>(int64_t{256} << 20, 2 * l3);
  const int64_t count = std::max<int64_t>(2, total / bytes);
  std::vector<Matrix> ms(count);
  ms[0] = make_matrix(dt, rows, cols);
  for (int64_t i = 1; i < count; ++i) {  // copies: distinct memory, the same values
    ms[i].bytes = ms[0].bytes;
    ms[i].ref = MatrixRef{ms[i].bytes.data(), dt, rows, cols};
  }
  std::vector<float> x(cols, 0.5f), y(rows);
  size_t next = 0;
  for (auto _ : state) {
    wick::kernels::matmul(ms[next].ref, x.data(), 1, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % ms.size();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// The machine's read bandwidth, against which the GEMVs' bytes/s are judged: one pass over a
// 1 GiB buffer (far beyond the caches) per iteration, split into one contiguous slice per thread
// of the kernel pool, each summed with 8 independent vector accumulators of the best ISA the CPU
// has (as ../shared/tools/membw.c's "read" does). Bytes/s over wall time.
constexpr size_t kReadBytes = size_t{1} << 30;
// GCC vector extensions: one loop for both widths, compiled inside each ISA's wrapper.
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));
template <class V>
__attribute__((always_inline)) inline float read_sum(const float* p, size_t n) {
  constexpr size_t kLanes = sizeof(V) / sizeof(float);
  V s[8] = {};
  for (size_t i = 0; i + 8 * kLanes <= n; i += 8 * kLanes)
    for (size_t j = 0; j < 8; ++j) s[j] += *reinterpret_cast<const V*>(p + i + kLanes * j);
  for (int j = 1; j < 8; ++j) s[0] += s[j];
  return s[0][0];
}
__attribute__((target("avx512f"), noinline)) float read_sum_avx512(const float* p, size_t n) {
  return read_sum<V16>(p, n);
}
__attribute__((target("avx2"), noinline)) float read_sum_avx2(const float* p, size_t n) {
  return read_sum<V8>(p, n);
}
void BM_ReadBandwidth(benchmark::State& state) {
  using wick::kernels::Isa;
  const Isa isa = wick::kernels::best_supported_isa();
  if (isa == Isa::kScalar) {
    state.SkipWithError("this CPU lacks AVX2");
    return;
  }
  auto& pool = bench_pool();
  const int64_t slices = pool.threads();
  const size_t n = kReadBytes / sizeof(float), slice = n / slices / 128 * 128;
  float* buf = static_cast<float*>(std::aligned_alloc(64, kReadBytes));
  // Each slice first touched by the thread that reads it.
  wick::kernels::parallel_for(pool, slices, [&](int64_t s) {
    std::memset(buf + s * slice, 0, slice * sizeof(float));
  });
  std::vector<float> sums(slices);
  for (auto _ : state) {
    wick::kernels::parallel_for(pool, slices, [&](int64_t s) {
      sums[s] = isa == Isa::kAvx512 ? read_sum_avx512(buf + s * slice, slice)
                                    : read_sum_avx2(buf + s * slice, slice);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(slices * slice * sizeof(float)));
  std::free(buf);
}

// The INT8 product with one instruction set: `isa` kAvx512 runs the VNNI kernel. With
// `outliers`, two weight columns and two input channels are 50x the rest (kernels/int8_matmul.h:
// both leave the integer sum and enter in fp32), to show what the outlier paths cost.
void BM_Int8(benchmark::State& state, wick::kernels::Isa isa, int64_t T, bool outliers = false) {
  using namespace wick::kernels;
  const bool runs = isa == Isa::kAvx512 ? int8::cpu_has_avx512_vnni()
                                         : static_cast<int>(isa) <= static_cast<int>(best_supported_isa());
  if (!runs) {
    state.SkipWithError("this CPU lacks the instruction set");
    return;
  }
  const int64_t rows = state.range(0), cols = state.range(1);
  Matrix m = make_matrix(DType::F32, rows, cols);
  std::vector<float> x(T * cols), y(T * rows);
  for (int64_t i = 0; i < T * cols; ++i) x[i] = 0.01f * static_cast<float>(i % 97) - 0.48f;
  if (outliers) {
    for (int64_t c : {int64_t{3}, cols - 68}) {
      for (int64_t r = 0; r < rows; ++r) {
        float* w = reinterpret_cast<float*>(m.bytes.data()) + r * cols + c;
        *w *= 50.0f;
      }
    }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c : {int64_t{100}, cols / 2 + 7}) x[t * cols + c] = t % 2 ? 24.0f : -22.0f;
  }
  const Int8Weights q = quantize_matrix_int8(m.ref, bench_pool());
  if (outliers && q.outlier_cols.size() != 2) {
    state.SkipWithError("expected two weight outlier columns");
    return;
  }
  for (auto _ : state) {
    int8::int8_matmul_isa(isa, q.view(), x.data(), T, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q.bytes()));
  if (T > 1)
    state.counters["GOP/s"] = benchmark::Counter(2.0 * rows * cols * T * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
}
void BM_GemvInt8(benchmark::State& state, wick::kernels::Isa isa) { BM_Int8(state, isa, 1); }
void BM_GemmInt8(benchmark::State& state, wick::kernels::Isa isa) {
  BM_Int8(state, isa, state.range(2));
}
void BM_GemvInt8Outliers(benchmark::State& state, wick::kernels::Isa isa) {
  BM_Int8(state, isa, 1, true);
}
void BM_GemmInt8Outliers(benchmark::State& state, wick::kernels::Isa isa) {
  BM_Int8(state, isa, state.range(2), true);
}

// The machine's fp32 FMA peak, against which the GEMM's GFLOP/s are judged: 10 independent
// 8-lane FMA chains per thread (AVX2 + FMA; enough to cover the FMA latency on two pipes), with
// 1 and 2 threads, GFLOP/s over wall time.
__attribute__((target("avx2,fma"), noinline)) float fma_chains(int64_t iterations, float mul) {
  __m256 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(mul), c = _mm256_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  __m256 s = acc[0];
  for (int i = 1; i < 10; ++i) s = _mm256_add_ps(s, acc[i]);
  return _mm256_cvtss_f32(s);
}
void BM_FmaPeak(benchmark::State& state) {
  if (wick::kernels::best_supported_isa() == wick::kernels::Isa::kScalar) {
    state.SkipWithError("this CPU lacks AVX2 + FMA");
    return;
  }
  constexpr int64_t kIterations = 1 << 20;
  float mul = 0.9999f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(mul);
    benchmark::DoNotOptimize(fma_chains(kIterations, mul));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * 8 * 10 * kIterations * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_Wkv7Sequence(benchmark::State& state) {
  const int H = static_cast<int>(state.range(0)), N = 64;
  const int64_t T = state.range(1), C = H * N;
  std::vector<float> S(H * N * N), r(T * C, 0.1f), w(T * C, 0.9f), k(T * C, 0.1f), v(T * C, 0.2f),
      kk(T * C, 0.125f), a(T * C, 0.5f), y(T * C);
  for (auto _ : state) {
    wick::kernels::wkv7_sequence(T, H, N, S.data(), r.data(), w.data(), k.data(), v.data(),
                                 kk.data(), a.data(), y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * T);
}

}  // namespace

BENCHMARK(BM_ReadBandwidth)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gemv, f32, DType::F32)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, bf16, DType::BF16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, f16, DType::F16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, f32, DType::F32)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, bf16, DType::BF16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, f16, DType::F16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvInt8, int8_scalar, wick::kernels::Isa::kScalar)->Args({768, 768})->Args({3072, 768})->Args({65536, 768});
BENCHMARK_CAPTURE(BM_GemvInt8, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768})->Args({3072, 768})->Args({65536, 768});
BENCHMARK_CAPTURE(BM_GemvInt8, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768})->Args({3072, 768})->Args({65536, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_Gemm, f32, DType::F32)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_Gemm, bf16, DType::BF16)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_GemmInt8, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemmInt8, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemvInt8Outliers, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_GemvInt8Outliers, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_GemmInt8Outliers, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemmInt8Outliers, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768, 64})->Args({768, 3072, 64});
BENCHMARK(BM_FmaPeak)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Wkv7Sequence)->Args({12, 1})->Args({12, 64});

BENCHMARK_MAIN();
