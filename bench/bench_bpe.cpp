// BPE encode throughput on the GPT-NeoX 20B tokenizer (and GPT-2), single thread.
//
// Corpus: the texts of shared/fixtures/tokenizers/corpus.jsonl joined with "\n", repeated until
// it is at least 10 MiB (bench/bpe_reference.mjs builds the same string for npm `tokenizers`;
// bench/run_bpe_compare.sh runs both). The "MB/s" counter is 10^6 bytes of UTF-8 input per second.
//
//   build/bench/bench_bpe [--benchmark_filter=Encode]
// Fixtures: $WICK_FIXTURES, else ../shared/fixtures next to the source tree.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"

namespace {

std::string fixtures_dir() {
  if (const char* env = std::getenv("WICK_FIXTURES")) return env;
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "shared" / "fixtures")
      .lexically_normal()
      .string();
}

const std::vector<std::string>& corpus_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    std::ifstream f(fixtures_dir() + "/tokenizers/corpus.jsonl", std::ios::binary);
    if (!f) {
      std::cerr << "bench_bpe: cannot read " << fixtures_dir() << "/tokenizers/corpus.jsonl\n";
      std::exit(1);
    }
    std::string line;
    while (std::getline(f, line)) {
      if (!line.empty()) t.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    }
    return t;
  }();
  return texts;
}

// The corpus texts joined with "\n", repeated to >= 10 MiB (same construction as the .mjs).
const std::string& big_corpus() {
  static const std::string big = [] {
    std::string one;
    for (const std::string& t : corpus_texts()) {
      one += t;
      one += '\n';
    }
    std::string b;
    while (b.size() < (size_t(10) << 20)) b += one;
    return b;
  }();
  return big;
}

const wick::BpeTokenizer& tokenizer(const std::string& file) {
  static std::map<std::string, std::unique_ptr<wick::BpeTokenizer>> cache;
  auto& t = cache[file];
  if (!t) t = wick::BpeTokenizer::load(fixtures_dir() + "/tokenizers/vocab/" + file);
  return *t;
}

void report(benchmark::State& state, size_t bytes_per_iter, size_t ids) {
  state.SetBytesProcessed(int64_t(state.iterations() * bytes_per_iter));
  state.counters["MB/s"] = benchmark::Counter(double(state.iterations()) * double(bytes_per_iter) /
                                                  1e6,
                                              benchmark::Counter::kIsRate);
  state.counters["input_MB"] = double(bytes_per_iter) / 1e6;
  state.counters["ids"] = double(ids);
}

// The whole >= 10 MiB corpus as one encode call.
void BM_BpeEncodeCorpus(benchmark::State& state, const char* file) {
  const auto& tok = tokenizer(file);
  const std::string& text = big_corpus();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  report(state, text.size(), n);
}

// The same bytes, one encode call per document (each repetition of each corpus text).
void BM_BpeEncodeDocuments(benchmark::State& state, const char* file) {
  const auto& tok = tokenizer(file);
  const auto& texts = corpus_texts();
  size_t one = 0;
  for (const auto& t : texts) one += t.size() + 1;
  const size_t reps = ((size_t(10) << 20) + one - 1) / one;
  size_t n = 0;
  for (auto _ : state) {
    n = 0;
    for (size_t r = 0; r < reps; ++r) {
      for (const auto& t : texts) {
        auto ids = tok.encode(t);
        n += ids.size();
        benchmark::DoNotOptimize(ids.data());
      }
    }
  }
  report(state, one * reps, n);
}

void BM_BpeLoad20B(benchmark::State& state) {
  const std::string path = fixtures_dir() + "/tokenizers/vocab/20B_tokenizer.json";
  for (auto _ : state) {
    auto t = wick::BpeTokenizer::load(path);
    benchmark::DoNotOptimize(t.get());
  }
}

void BM_BpeDecode20B(benchmark::State& state) {
  const auto& tok = tokenizer("20B_tokenizer.json");
  const auto ids = tok.encode(big_corpus());
  for (auto _ : state) {
    auto s = tok.decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  report(state, big_corpus().size(), ids.size());
}

BENCHMARK_CAPTURE(BM_BpeEncodeCorpus, neox20B, "20B_tokenizer.json")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_BpeEncodeDocuments, neox20B, "20B_tokenizer.json")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK_CAPTURE(BM_BpeEncodeCorpus, gpt2, "gpt2_tokenizer.json")
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_BpeDecode20B)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BpeLoad20B)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
