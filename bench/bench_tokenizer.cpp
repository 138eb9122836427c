// Tokenizer benchmarks (performance only; correctness lives in tests/tokenizer). World encode on a
// corpus of >= 10 MB built by repeating the fixture corpus texts (every script, emoji, whitespace
// runs, code, invalid-looking text), reported as input bytes per second; decode and streaming decode
// of the same ids, reported as output bytes per second.
//   build/bench/bench_tokenizer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Fixtures: $WICK_FIXTURES, else ../shared/fixtures next to the source tree.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/world_tokenizer.h"
#include "wick/tokenizer.h"

namespace {

std::string fixtures_dir() {
  if (const char* env = std::getenv("WICK_FIXTURES"); env && *env) return env;
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "shared" / "fixtures")
      .lexically_normal()
      .string();
}

std::string fixture(const std::string& rel) {
  std::string p = fixtures_dir() + "/" + rel;
  if (!std::filesystem::exists(p)) {
    throw std::runtime_error("fixture missing: " + p + " (set WICK_FIXTURES)");
  }
  return p;
}

const wick::WorldTokenizer& world() {
  static const std::unique_ptr<wick::WorldTokenizer> tok =
      wick::WorldTokenizer::load(fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  return *tok;
}

// The corpus texts, each followed by a newline, repeated until the result is >= 10 MB.
const std::string& corpus() {
  static const std::string text = [] {
    std::ifstream f(fixture("tokenizers/corpus.jsonl"), std::ios::binary);
    std::string once, line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      once += nlohmann::json::parse(line).at("text").get<std::string>();
      once += '\n';
    }
    std::string all;
    const size_t target = size_t{10} << 20;
    all.reserve(target + once.size());
    while (all.size() < target) all += once;
    return all;
  }();
  return text;
}

const std::vector<int32_t>& corpus_ids() {
  static const std::vector<int32_t> ids = world().encode(corpus());
  return ids;
}

void BM_WorldEncode(benchmark::State& state) {
  const wick::WorldTokenizer& tok = world();
  const std::string& text = corpus();
  size_t n = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = tok.encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(text.size()));
  state.counters["corpus_MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(n);
}
BENCHMARK(BM_WorldEncode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WorldDecode(benchmark::State& state) {
  const wick::WorldTokenizer& tok = world();
  const std::vector<int32_t>& ids = corpus_ids();
  for (auto _ : state) {
    std::string bytes = tok.decode(ids);
    benchmark::DoNotOptimize(bytes.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus().size()));
}
BENCHMARK(BM_WorldDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WorldStreamDecode(benchmark::State& state) {
  const wick::WorldTokenizer& tok = world();
  const std::vector<int32_t>& ids = corpus_ids();
  for (auto _ : state) {
    wick::StreamDecoder dec(tok);
    size_t total = 0;
    for (int32_t id : ids) total += dec.push(id).size();
    total += dec.flush().size();
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus().size()));
}
BENCHMARK(BM_WorldStreamDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WorldLoad(benchmark::State& state) {
  const std::string path = fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt");
  for (auto _ : state) {
    auto tok = wick::WorldTokenizer::load(path);
    benchmark::DoNotOptimize(tok.get());
  }
}
BENCHMARK(BM_WorldLoad)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
