// wick bench tokenizer --tokenizer PATH --file F [--runs N]
// Encodes the file's bytes N times on one thread and reports the median throughput in MB/s
// (10^6 input bytes per second) and tokens/s, with the min and max, on stdout.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bench/stats.h"
#include "bench/timer.h"
#include "commands.h"
#include "common.h"
#include "wick/errors.h"

namespace wick::cli {

void register_bench_limits(CLI::App* bench);  // cmd_bench_limits.cpp

namespace {

struct BenchTokenizerOptions {
  std::string tokenizer, file;
  int runs = 5;
};

void run_bench_tokenizer(const BenchTokenizerOptions& o) {
  auto tok = tokenizer_or_default(o.tokenizer);
  std::ifstream f(o.file, std::ios::binary);
  if (!f) throw FileError(o.file, "cannot open the text file");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) throw InputError(o.file + ": the file is empty; nothing to tokenize");
  std::vector<double> seconds;
  size_t tokens = 0;
  for (int r = 0; r < o.runs; ++r)
    seconds.push_back(bench::seconds_of([&] { tokens = tok->encode(text).size(); }));
  const bench::Summary s = bench::summarize(seconds);
  const double mb = static_cast<double>(text.size()) / 1e6;
  fmt::print(
      "tokenizer  {} ({})\nfile       {} ({:.2f} MB, {} tokens, {:.2f} bytes/token)\n"
      "encode     median {:.1f} MB/s, {:.0f} tokens/s (min {:.1f}, max {:.1f} MB/s; {} runs, "
      "1 thread)\n",
      o.tokenizer.empty() ? "<embedded World vocabulary>" : o.tokenizer, tok->name(), o.file, mb,
      tokens, static_cast<double>(text.size()) / std::max<size_t>(tokens, 1), mb / s.median,
      static_cast<double>(tokens) / s.median, mb / s.max, mb / s.min, o.runs);
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(0, 1);
  auto o = std::make_shared<BenchTokenizerOptions>();
  CLI::App* cmd = bench->add_subcommand("tokenizer", "Tokenizer encode throughput on a file");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or tokenizer.json (BPE); default: embedded World");
  cmd->add_option("--file", o->file, "Text file (its bytes, verbatim)")->required();
  cmd->add_option("--runs", o->runs, "Repetitions (median reported)")->check(CLI::Range(1, 1000));
  cmd->callback([o] { run_bench_tokenizer(*o); });
  register_bench_generate(bench);
  register_bench_serve(bench);
  register_bench_model(bench);
  register_bench_tasks(bench);
  register_bench_limits(bench);
}

}  // namespace wick::cli
