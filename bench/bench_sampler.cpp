// Sampler benchmarks (performance only; correctness lives in tests/generate/test_sampler.cpp):
// one select() (+ observe) at the World vocabulary size V = 65536, on synthetic logits shaped like
// a language model's (a Gaussian bulk and a handful of strong candidates; see make_steps). Reported
// as time per select; compare with a decode step of ~10 ms.
//   build/bench/bench_sampler --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// BM_NaiveFullSort is the cost this sampler avoids: one std::stable_sort of all ids per token.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "wick/sampler.h"

namespace {

constexpr int kVocab = 65536;
constexpr int kSteps = 16;  // distinct logit vectors in rotation

// Logits of kSteps decode steps: bulk N(0, 2.5); 1-40 candidates raised by up to `lift` nats.
// Typical: lifts 22, 18, 15, 12 in rotation, a mean entropy of about 2.4 nats (0.8, 1.3, 3.4, 4.0)
// like a language model on ordinary text. Flat: lift 9, entropy about 7.7 nats, the top 90 % of
// the mass spread over ~7000 ids (a hard case for any top-p sampler).
std::vector<std::vector<float>> make_steps(std::initializer_list<float> lifts) {
  std::mt19937_64 gen(2024);
  std::normal_distribution<float> bulk(0.f, 2.5f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> logits(kVocab);
    for (float& x : logits) x = bulk(gen);
    const float lift = lifts.begin()[s % lifts.size()];
    const int candidates = 1 + static_cast<int>(gen() % 40);
    for (int c = 0; c < candidates; ++c) logits[gen() % kVocab] += lift * unit(gen);
    out.push_back(std::move(logits));
  }
  return out;
}

const std::vector<std::vector<float>>& typical_steps() {
  static const std::vector<std::vector<float>> steps = make_steps({22.f, 18.f, 15.f, 12.f});
  return steps;
}

const std::vector<std::vector<float>>& flat_steps() {
  static const std::vector<std::vector<float>> steps = make_steps({9.f});
  return steps;
}

void run(benchmark::State& state, const wick::SamplingConfig& config,
         const std::vector<std::vector<float>>& steps = typical_steps()) {
  wick::Sampler sampler(config, kVocab, [](int32_t) { return std::string("x"); });
  size_t i = 0;
  for (auto _ : state) {
    const int32_t id = sampler.select(steps[i++ % kSteps]);
    sampler.observe(id);
    benchmark::DoNotOptimize(id);
  }
}

wick::SamplingConfig standard(float temperature, int top_k, float top_p) {
  wick::SamplingConfig c;
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = top_p;
  return c;
}

void BM_Greedy(benchmark::State& state) {
  run(state, standard(0, 0, 1));
}
void BM_TopP09(benchmark::State& state) {
  run(state, standard(1, 0, 0.9f));
}
void BM_TopK40(benchmark::State& state) {
  run(state, standard(1, 40, 1));
}
void BM_NoTruncation(benchmark::State& state) {
  run(state, standard(1, 0, 1));
}
void BM_TopP09Flat(benchmark::State& state) {
  run(state, standard(1, 0, 0.9f), flat_steps());
}
void BM_NoTruncationFlat(benchmark::State& state) {
  run(state, standard(1, 0, 1), flat_steps());
}
void BM_TopP09Penalised(benchmark::State& state) {
  wick::SamplingConfig c = standard(0.8f, 0, 0.9f);
  c.presence_penalty = 0.3f;
  c.frequency_penalty = 0.3f;
  c.penalty_decay = 0.99f;
  run(state, c);
}
void BM_ChatRwkvChat(benchmark::State& state) {
  run(state, wick::SamplingConfig::chatrwkv_chat());
}
void BM_ChatRwkvPipeline(benchmark::State& state) {
  run(state, wick::SamplingConfig::chatrwkv_pipeline());
}

// The baseline the lazy order replaces: softmax plus a stable sort of every id.
void BM_NaiveFullSort(benchmark::State& state) {
  const auto& steps = typical_steps();
  std::vector<int32_t> order(kVocab);
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<float>& z = steps[i++ % kSteps];
    const std::vector<float> p = wick::softmax(z);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
    benchmark::DoNotOptimize(order.data());
    benchmark::DoNotOptimize(p.data());
  }
}

BENCHMARK(BM_Greedy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopP09)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopK40)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NoTruncation)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopP09Flat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NoTruncationFlat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TopP09Penalised)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ChatRwkvChat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ChatRwkvPipeline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NaiveFullSort)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
