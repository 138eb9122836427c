// Quantised matrix kernel benchmarks (performance only; correctness lives in
// tests/kernels/test_qmatmul.cpp). GEMV (T = 1, the decode step) and GEMM (T = 16, batched decode; T = 64) of the sb6
// (4/5/6 bits) and sym (8/6 bits) layouts, exact and as the integer product of inputs rounded to
// 8 bits (Precision::kInt8), at the 0.1B shapes (C = 768, F = 3072, V = 65536), next
// to the dense bf16 product of the same shape. Reported bytes are the stored weight bytes read per
// call (codes, planes and scales), to be judged against the machine's memory bandwidth.
//   build/bench/bench_qmatmul --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// WICK_ISA=scalar|avx2|avx512 and WICK_THREADS=n select the instruction set and thread count.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/qmatmul.h"
#include "bench_pool.h"

namespace {

using wick::kernels::Sb6Matrix;
using wick::kernels::SymMatrix;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const uint32_t r = rng();
    std::memcpy(&v[i], &r, 4);
  }
  return v;
}

// Random codes; scales that decode to moderate values (the speed does not depend on them).
struct Sb6Data {
  std::vector<uint8_t> codes, qh, qh2, qsqm, d, dm;
  std::vector<uint16_t> sm;
  std::vector<uint8_t> hb;
  Sb6Matrix m;
  Sb6Data(const Sb6Data&) = delete;  // m.sm and m.hb point into sm and hb
  Sb6Data(int bits, int64_t rows, int64_t cols) {
    codes = random_bytes(rows * cols / 2, 1);
    if (bits >= 5) qh = random_bytes(rows * cols / 8, 2);
    if (bits >= 6) qh2 = random_bytes(rows * cols / 8, 3);
    qsqm = random_bytes(rows * cols / 256 * 12, 4);
    d.resize(rows * cols / 256 * 2);
    dm.resize(d.size());
    for (size_t i = 0; i < d.size(); i += 2) {
      const uint16_t h = 0x1000;  // ~4.9e-4
      std::memcpy(&d[i], &h, 2);
      std::memcpy(&dm[i], &h, 2);
    }
    m = Sb6Matrix{codes.data(),
                  qh.empty() ? nullptr : qh.data(),
                  qh2.empty() ? nullptr : qh2.data(),
                  qsqm.data(),
                  d.data(),
                  dm.data(),
                  rows,
                  cols,
                  bits};
    sm = wick::kernels::unpack_sb6_scales(m);
    m.sm = sm.data();
    hb = wick::kernels::attach_int8_high_bits(m);
  }
  // What the SIMD kernels read: the codes, the planes (or their rearranged copy) and the unpacked
  // scales.
  int64_t bytes() const {
    return static_cast<int64_t>(codes.size() + qh.size() + qh2.size() +
                                sm.size() * sizeof(uint16_t));
  }
};

struct SymData {
  std::vector<uint8_t> codes, packed, qh, qh2, qs, d, hb;
  SymMatrix m;
  SymData(const SymData&) = delete;  // m.hb points into hb
  SymData(int bits, int64_t rows, int64_t cols) {
    if (bits == 8) {
      codes = random_bytes(rows * cols, 1);
    } else {
      packed = random_bytes(rows * cols / 2, 1);
      qh = random_bytes(rows * cols / 8, 2);
      qh2 = random_bytes(rows * cols / 8, 3);
    }
    qs = random_bytes(rows * cols / 16, 4);
    d.resize(rows * cols / 256 * 2);
    for (size_t i = 0; i < d.size(); i += 2) {
      const uint16_t h = 0x0100;  // subnormal, as real sym scales are
      std::memcpy(&d[i], &h, 2);
    }
    m = SymMatrix{codes.empty() ? nullptr : reinterpret_cast<const int8_t*>(codes.data()),
                  packed.empty() ? nullptr : packed.data(),
                  qh.empty() ? nullptr : qh.data(),
                  qh2.empty() ? nullptr : qh2.data(),
                  reinterpret_cast<const int8_t*>(qs.data()),
                  d.data(),
                  rows,
                  cols,
                  bits};
    hb = wick::kernels::attach_int8_high_bits(m);
  }
  // What the kernels read: the codes, the planes (or their rearranged copy) and the scales.
  int64_t bytes() const {
    return static_cast<int64_t>(codes.size() + packed.size() + qh.size() + qh2.size() + qs.size() +
                                d.size());
  }
};

template <class Data>
void run(benchmark::State& state, const Data& data, int64_t rows, int64_t cols, int64_t T) {
  std::vector<float> x(T * cols), y(T * rows);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    wick::kernels::qmatmul(data.m, x.data(), T, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * data.bytes());
  state.counters["bits/w"] = 8.0 * data.bytes() / (rows * cols);
}

void BM_Sb6(benchmark::State& state, int bits) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  const Sb6Data data(bits, rows, cols);
  run(state, data, rows, cols, T);
}

// The integer product of inputs rounded to 8 bits (Precision::kInt8): the rounding of the inputs
// (kernels/int8_inputs.h) is part of each call, as it is in the model.
template <class Data>
void BM_Int8(benchmark::State& state, int bits) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  const Data data(bits, rows, cols);
  std::vector<float> x(T * cols), y(T * rows);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<int8_t> codes(T * cols);
  std::vector<float> scales(T * wick::kernels::int8_input_blocks(cols));
  for (auto _ : state) {
    wick::kernels::round_inputs_int8(x.data(), T, cols, codes.data(), scales.data(),
                                     bench_pool());
    wick::kernels::qmatmul_int8_inputs(data.m, {codes.data(), scales.data(), T, cols}, y.data(),
                                       bench_pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * data.bytes());
  state.counters["bits/w"] = 8.0 * data.bytes() / (rows * cols);
}

void BM_Sb6Int8(benchmark::State& state, int bits) { BM_Int8<Sb6Data>(state, bits); }
void BM_SymInt8(benchmark::State& state, int bits) { BM_Int8<SymData>(state, bits); }

void BM_Sym(benchmark::State& state, int bits) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  const SymData data(bits, rows, cols);
  run(state, data, rows, cols, T);
}

// The load-time unpacking of a matrix's sb6 scales (kernels/qmatmul.h unpack_sb6_scales; one
// thread): weights per second.
void BM_UnpackSb6Scales(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const Sb6Data data(4, rows, cols);
  for (auto _ : state) {
    std::vector<uint16_t> sm = wick::kernels::unpack_sb6_scales(data.m);
    benchmark::DoNotOptimize(sm.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

void BM_Bf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1), T = state.range(2);
  std::vector<uint16_t> w(rows * cols);
  std::mt19937 rng(1);
  for (auto& v : w) v = static_cast<uint16_t>(0x3c00 + rng() % 0x400);  // ~0.008 .. 0.016
  const wick::kernels::MatrixRef ref{w.data(), wick::DType::BF16, rows, cols};
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  for (auto _ : state) {
    wick::kernels::matmul(ref, x.data(), T, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * cols * 2);
  state.counters["bits/w"] = 16;
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "T"});
  for (int64_t T : {1, 16, 64})  // decode, batched decode of 16 rows, prefill
    for (auto [r, c] :
         {std::pair<int64_t, int64_t>{768, 768}, {3072, 768}, {768, 3072}, {65536, 768}}) {
      if (T > 1 && r == 65536) continue;  // the head is only ever a GEMV in decode
      b->Args({r, c, T});
    }
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
}

// The GEMM over decoded rows (kernels/matmul.cpp matmul_decoded: the row-major tile or the
// lane-major panels) across prompt lengths: the 0.1B FFN's key matrix (short rows: the row-major
// tile at every T), its value matrix and the 1.5B one's (long rows: lane-major from 64 inputs).
void long_row_prefill(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "T"});
  for (auto [r, c] : {std::pair<int64_t, int64_t>{3072, 768}, {768, 3072}, {2048, 8192}})
    for (int64_t T : {32, 64, 128, 256}) b->Args({r, c, T});
  b->Unit(benchmark::kMillisecond);
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Sb6, sb6_4, 4)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sb6, sb6_4_long_rows, 4)->Apply(long_row_prefill);
BENCHMARK_CAPTURE(BM_Sb6, sb6_5, 5)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sb6, sb6_6, 6)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sb6Int8, sb6_4_int8, 4)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sb6Int8, sb6_5_int8, 5)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sb6Int8, sb6_6_int8, 6)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sym, sym_8, 8)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Sym, sym_6, 6)->Apply(shapes);
BENCHMARK_CAPTURE(BM_SymInt8, sym_8_int8, 8)->Apply(shapes);
BENCHMARK_CAPTURE(BM_SymInt8, sym_6_int8, 6)->Apply(shapes);
BENCHMARK(BM_Bf16)->Apply(shapes);
BENCHMARK(BM_UnpackSb6Scales)->ArgNames({"rows", "cols"})->Args({65536, 768})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
