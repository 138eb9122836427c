// Kernel benchmarks (performance only; correctness lives in tests/kernels). GEMV at the shapes of
// the 0.1B geometry (C = 768, F = 3072, V = 65536) in each weight dtype, reported as weight bytes
// read per second so they can be judged against the read bandwidth measured in the same run
// (BM_ReadBandwidth: both threads, 8 vector accumulators each, 1 GiB); the GEMM of the
// parallel pass next to the machine's fp32 FMA peak (BM_FmaPeak); the WKV-7 recurrence. The
// INT8 GEMV of `--quantize int8` (kernels/int8_matmul.h) at the same shapes, per kernel (scalar
// reference, AVX2, AVX-512 VNNI - skipped where the CPU lacks it), bytes = codes + scales read.
//   build/bench/bench_kernels --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/probes.h"
#include "bench_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/int8_matmul.h"
#include "kernels/int8_matmul_impl.h"
#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/panels.h"
#include "kernels/wkv7.h"

namespace {

using wick::DType;
using wick::kernels::MatrixRef;

struct Matrix {
  std::vector<uint8_t> bytes;
  MatrixRef ref;
  std::vector<uint8_t> packed;  // the panels (kernels/panels.h), when packed
  MatrixRef panels;
};

// m's panels, packed (their own copy of the weights).
void pack(Matrix& m) {
  m.packed.resize(wick::kernels::panel_bytes(m.ref.rows, m.ref.cols, m.ref.dtype));
  m.panels = wick::kernels::pack_panels(m.ref, m.packed.data(), bench_pool());
}

// The product of T inputs with m: kernels/matmul.h, or over m's panels (kernels/panels.h).
void product(const Matrix& m, const float* x, int64_t T, float* y, bool panels) {
  if (panels)
    wick::kernels::matmul(m.panels, x, T, y, bench_pool());
  else
    wick::kernels::matmul(m.ref, x, T, y, bench_pool());
}

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

// `panels`: the same product over the matrix packed into panels (BM_PanelGemm).
void BM_Gemm(benchmark::State& state, DType dt, bool panels = false) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  Matrix m = make_matrix(dt, rows, cols);
  if (panels) pack(m);
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  for (auto _ : state) {
    product(m, x.data(), T, y.data(), panels);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
}

// The --precision bf16 product of bf16 weights (kernels/matmul.h: matmul_bf16_inputs): the BF16
// dot product where the CPU has it (judged against BM_Bf16DotPeak), else the fp32 kernels (the
// label says which). Inputs are bf16 values held as fp32, as the pass rounds them.
void BM_GemmBf16Inputs(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  Matrix m = make_matrix(DType::BF16, rows, cols);
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  for (auto _ : state) {
    wick::kernels::matmul_bf16_inputs(m.ref, x.data(), T, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  const wick::kernels::Bf16DotKernels* k = wick::kernels::bf16_dot_kernels();
  state.SetLabel(k ? k->name : "fp32-dot");
}

// The GEMV (inputs = 1) and the small-M GEMM of batched decode (16 inputs) as decode sees
// them: the weights come from DRAM, not cache. Cycles through enough distinct matrices of one
// shape (>= 256 MiB in all, and at least twice the L3 the C library reports: 480 MiB on the Xeon
// this was last measured on) that every call streams its matrix from memory. Weight bytes/s is
// to be judged against BM_ReadBandwidth, GFLOP/s against BM_FmaPeak.
void from_memory(benchmark::State& state, DType dt, int64_t rows, int64_t cols, int64_t T,
                 bool panels = false) {
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
  if (panels)  // the packed copies are what the product reads; the row-major ones are let go
    for (Matrix& m : ms) {
      pack(m);
      std::vector<uint8_t>().swap(m.bytes);
    }
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  size_t next = 0;
  for (auto _ : state) {
    product(ms[next], x.data(), T, y.data(), panels);
    benchmark::DoNotOptimize(y.data());
    next = (next + 1) % ms.size();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * T * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_GemvFromMemory(benchmark::State& state, DType dt) {
  from_memory(state, dt, state.range(0), state.range(1), 1);
}

void BM_GemmFromMemory(benchmark::State& state, DType dt) {
  from_memory(state, dt, state.range(0), state.range(1), state.range(2));
}

// The same three over weights packed into panels (kernels/panels.h: one FMA chain per output,
// no horizontal sums), side by side with the row-major kernels above.
void BM_PanelGemm(benchmark::State& state, DType dt) {
  BM_Gemm(state, dt, true);
}
void BM_PanelGemvFromMemory(benchmark::State& state, DType dt) {
  from_memory(state, dt, state.range(0), state.range(1), 1, true);
}
void BM_PanelGemmFromMemory(benchmark::State& state, DType dt) {
  from_memory(state, dt, state.range(0), state.range(1), state.range(2), true);
}

// The machine's read bandwidth, against which the GEMVs' bytes/s are judged: the bench library's
// probe (bench/probes.h: 1 GiB, one share per thread of the kernel pool, 8 vector accumulators of
// the best ISA), one pass per iteration. Bytes/s over wall time.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = bench_pool().threads();
  double bytes = 0;
  for (auto _ : state) {
    const wick::bench::BandwidthResult r =
        wick::bench::measure_read_bandwidth({.threads = threads, .bytes = 1ull << 30, .passes = 1});
    state.SetIterationTime(r.pass_seconds[0]);
    bytes += static_cast<double>(r.bytes_read);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
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

// The machine's fp32 FMA peak, against which the GEMM's GFLOP/s are judged: src/bench's probe
// (bench/probes.h: 12 independent vector FMA chains per thread on the best ISA the CPU has, the
// one `wick bench` reports as fma_peak_gflop_s) with 1 and 2 threads; the time of each iteration
// is the probe's own pass time (its threads start together on a barrier).
void BM_FmaPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  double flops = 0;
  std::string isa;
  for (auto _ : state) {
    const wick::bench::FmaPeakResult r =
        wick::bench::measure_fma_peak({.threads = threads, .iterations = 1 << 20, .passes = 1});
    state.SetIterationTime(r.pass_seconds[0]);
    flops += r.flops;
    isa = r.isa;
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(isa);
}

// The BF16 dot-product peak (bench/probes.h: measure_bf16_dot_peak, what `wick bench` reports as
// bf16_dot_peak_gflop_s), the limit of BM_GemmBf16Inputs; skipped where the CPU has no AVX-512
// BF16.
void BM_Bf16DotPeak(benchmark::State& state) {
  if (!wick::bench::has_bf16_dot_peak()) {
    state.SkipWithError("no AVX-512 BF16 on this CPU");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  double flops = 0;
  for (auto _ : state) {
    const wick::bench::FmaPeakResult r = wick::bench::measure_bf16_dot_peak(
        {.threads = threads, .iterations = 1 << 20, .passes = 1});
    state.SetIterationTime(r.pass_seconds[0]);
    flops += r.flops;
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel("avx512-bf16");
}

// The WKV recurrence of H heads (N = 64): `segments` sequences of T tokens each, each against its
// own state, in one call - {12, 64, 1} a prefill's, {12, 1, 16} a 16-row batched step's. Items:
// tokens.
void BM_Wkv7Segments(benchmark::State& state) {
  const int H = static_cast<int>(state.range(0)), N = 64;
  const int64_t T = state.range(1), n = state.range(2), C = H * N;
  std::vector<float> S(n * H * N * N), r(T * C, 0.1f), w(T * C, 0.9f), k(T * C, 0.1f),
      v(T * C, 0.2f), kk(T * C, 0.125f), a(T * C, 0.5f), y(n * T * C);
  std::vector<wick::kernels::Wkv7Segment> segs;
  for (int64_t i = 0; i < n; ++i)  // the inputs are shared (read only); states and outputs are not
    segs.push_back({T, S.data() + i * H * N * N, r.data(), w.data(), k.data(), v.data(), kk.data(),
                    a.data(), y.data() + i * T * C});
  for (auto _ : state) {
    wick::kernels::wkv7_segments(segs.data(), n, H, N, bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * T * n);
}

// The time mix's independent products at the 0.1B geometry (r/k/v bf16 768 x 768 and the fp32
// LoRA down-projections w1, a1, g1, v1 of 64, 64, 128, 32 rows), warm in cache: one pool job each
// (together = 0) against one job for all (kernels::matmul_all, together = 1), for T inputs. What
// it isolates is the pool's per-job cost (wake-up, barrier, the last block's imbalance).
void BM_TimeMixProducts(benchmark::State& state) {
  const bool together = state.range(0) != 0;
  const int64_t T = state.range(1), C = 768;
  std::vector<Matrix> ms;
  for (int i = 0; i < 3; ++i) ms.push_back(make_matrix(DType::BF16, C, C));
  for (int64_t rows : {64, 64, 128, 32}) ms.push_back(make_matrix(DType::F32, rows, C));
  std::vector<float> x(T * C, 0.5f);
  std::vector<std::vector<float>> ys;
  std::vector<wick::kernels::MatmulCall> calls;
  for (const Matrix& m : ms) ys.emplace_back(T * m.ref.rows);
  for (size_t i = 0; i < ms.size(); ++i) calls.push_back({ms[i].ref, x.data(), ys[i].data()});
  for (auto _ : state) {
    if (together) {
      wick::kernels::matmul_all(calls, T, bench_pool());
    } else {
      for (const auto& c : calls) wick::kernels::matmul(c.w, c.x, T, c.y, bench_pool());
    }
    benchmark::DoNotOptimize(ys.back().data());
  }
}

// LayerNorm of one row of n channels (the 0.1B's 768, the 1.5B's 2048), warm in cache. Items:
// channels.
void BM_LayerNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x(n), gamma(n, 1.25f), beta(n, 0.5f), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) * 0.25f - 2.f;
  for (auto _ : state) {
    wick::kernels::layer_norm(x.data(), gamma.data(), beta.data(), y.data(), n, 1e-5);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

}  // namespace

BENCHMARK(BM_ReadBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Gemv, f32, DType::F32)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, bf16, DType::BF16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemv, f16, DType::F16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, f32, DType::F32)->Args({32, 768})->Args({64, 768})->Args({128, 768})->Args({768, 64})->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, bf16, DType::BF16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvFromMemory, f16, DType::F16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmFromMemory, f32, DType::F32)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({768, 3072, 16})->Args({65536, 768, 16})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmFromMemory, bf16, DType::BF16)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({768, 3072, 16})->Args({65536, 768, 16})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemvInt8, int8_scalar, wick::kernels::Isa::kScalar)->Args({768, 768})->Args({3072, 768})->Args({65536, 768});
BENCHMARK_CAPTURE(BM_GemvInt8, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768})->Args({3072, 768})->Args({65536, 768});
BENCHMARK_CAPTURE(BM_GemvInt8, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768})->Args({3072, 768})->Args({65536, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_Gemm, f32, DType::F32)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_Gemm, bf16, DType::BF16)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({65536, 768, 16})->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_GemmInt8, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemmInt8, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemvInt8Outliers, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_GemvInt8Outliers, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768})->Args({768, 3072});
BENCHMARK_CAPTURE(BM_GemmInt8Outliers, int8_avx2, wick::kernels::Isa::kAvx2)->Args({768, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_GemmInt8Outliers, int8_avx512_vnni, wick::kernels::Isa::kAvx512)->Args({768, 768, 64})->Args({768, 3072, 64});
BENCHMARK_CAPTURE(BM_PanelGemm, f32, DType::F32)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_PanelGemm, bf16, DType::BF16)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({65536, 768, 16})->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK_CAPTURE(BM_PanelGemvFromMemory, f32, DType::F32)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_PanelGemvFromMemory, bf16, DType::BF16)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({65536, 768})->UseRealTime();
BENCHMARK_CAPTURE(BM_PanelGemmFromMemory, f16, DType::F16)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({768, 3072, 16})->Args({65536, 768, 16})->UseRealTime();
BENCHMARK_CAPTURE(BM_PanelGemmFromMemory, bf16, DType::BF16)->Args({768, 768, 16})->Args({3072, 768, 16})->Args({768, 3072, 16})->Args({65536, 768, 16})->UseRealTime();
BENCHMARK(BM_FmaPeak)->ArgName("threads")->Arg(1)->Arg(2)->UseManualTime();
BENCHMARK(BM_GemmBf16Inputs)->Args({768, 768, 64})->Args({3072, 768, 64})->Args({768, 768, 512})->Args({3072, 768, 512})->Args({768, 3072, 512});
BENCHMARK(BM_Bf16DotPeak)->ArgName("threads")->Arg(1)->Arg(2)->UseManualTime();
BENCHMARK(BM_TimeMixProducts)->ArgNames({"together", "T"})->Args({0, 1})->Args({1, 1})->Args({0, 16})->Args({1, 16})->UseRealTime();
BENCHMARK(BM_LayerNorm)->Arg(768)->Arg(2048);
BENCHMARK(BM_Wkv7Segments)->Args({12, 1, 1})->Args({12, 64, 1})->Args({12, 1, 16});

BENCHMARK_MAIN();
