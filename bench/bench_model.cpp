// End-to-end benchmarks of the two passes on the embedded tiny model (L 12, C 64): prefill of a
// prompt through the parallel pass, and the recurrent decode step. Larger, real-geometry synthetic
// checkpoints arrive with `wick synth`.
//   build/bench/bench_model --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <vector>

#include "wick/model.h"

namespace {

const wick::Model& model() {
  static const wick::Model m = wick::Model::load_default();
  return m;
}

void BM_Prefill(benchmark::State& state) {
  std::vector<int32_t> tokens(state.range(0));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 167 + 13) % 256);
  for (auto _ : state) {
    wick::State st = model().new_state();
    benchmark::DoNotOptimize(model().forward(tokens, st));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));  // tokens
}

void BM_DecodeStep(benchmark::State& state) {
  wick::State st = model().new_state();
  int32_t tok = 32;
  for (auto _ : state) {
    auto logits = model().step(tok, st);
    tok = static_cast<int32_t>((tok + 1) % 256);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations());  // tokens
}

}  // namespace

BENCHMARK(BM_Prefill)->Arg(64)->Arg(512);
BENCHMARK(BM_DecodeStep);

BENCHMARK_MAIN();
