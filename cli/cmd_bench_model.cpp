// wick bench --model F [--threads N] [--prompt 64,512] [--gen 128] [--depth 0,8192] [--reps 5]
//            [--json] [RWKV-X attention flags]
// Model speed in the manner of llama-bench: per prompt length a prefill test "ppN" (one parallel
// pass over N tokens from a zero state) and a decode test "tgN" (N recurrent steps from a zero
// state), each repeated --reps times; the median tokens/s with its standard deviation, ms/token,
// the model's load time and memory (resident after load, while decoding, peak during prefill).
// The decode test also measures the memory read bandwidth in the same run and reports the
// roofline: bytes one step reads (ModelInfo::bytes_per_token) / bandwidth, and the fraction of
// it reached; the prefill test measures the fp32 FMA peak and reports the fraction of it the
// matrix products reach. The probes, timers, statistics and RSS readings are src/bench's
// (bench/*.h). Same output for every weight format (dense, .rwkvq, or --quantize int8, reported
// as weight_format "int8").
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/memory.h"
#include "bench/probes.h"
#include "bench/roofline.h"
#include "bench/stats.h"
#include "bench/timer.h"
#include "bench_format.h"
#include "commands.h"
#include "common.h"
#include "wick/errors.h"
#include "wick/runtime.h"

namespace wick::cli {
namespace {

struct BenchModelOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model;
  int threads = 0;
  std::vector<int> prompt = {512};
  std::vector<int> gen = {128};
  std::vector<int> depth = {0};  // decode after this many tokens of context (KV rows for RWKV-X)
  int reps = 5;
  int bandwidth_mib = 1024;  // the bandwidth probe's working set, all threads together
  bool json = false;
};

using bench::Clock;
using bench::seconds_since;

std::vector<int32_t> bench_tokens(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t[i] = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  return t;
}

// The state decode starts from at `depth` tokens of context. The recurrent part comes from a real
// prefill of min(depth, 512) tokens; an RWKV-X KV cache is then tiled with those rows up to
// `depth` (a step's work depends on the number of cached rows, not on their values, so this times
// decode at that depth without an O(depth^2) full-attention prefill).
State state_at_depth(const Model& model, int depth) {
  State st = model.new_state();
  if (depth <= 0) return st;
  const int64_t kv_max = model.attention().kv_max;
  if (model.geometry().n_attn > 0 && kv_max > 0 && depth >= kv_max) {
    throw InputError("--depth " + std::to_string(depth) +
                     " leaves no room in a KV cache of --kv-max " + std::to_string(kv_max) +
                     "; raise --kv-max or lower --depth");
  }
  const int real = std::min(depth, 512);
  model.forward(bench_tokens(real, model.geometry().vocab, 3), st);
  if (model.geometry().n_attn == 0 || depth == real) return st;
  const int64_t C = model.geometry().n_embd;
  st.resize_kv(depth);
  for (int j = 0; j < st.n_attn(); ++j) {
    for (int64_t p = real; p < depth; ++p) {
      std::copy_n(st.k_cache(j) + (p % real) * C, C, st.k_cache(j) + p * C);
      std::copy_n(st.v_cache(j) + (p % real) * C, C, st.v_cache(j) + p * C);
    }
  }
  return st;
}

// Refuses, before any work, a --depth whose KV caches (RWKV-X) cannot fit in memory: the decode
// test holds the start state and a copy that grows by half again when decode appends to it, about
// 3.5 caches of depth + gen rows. (It used to end in "internal error: std::bad_alloc", or worse.)
void check_depth_fits(const BenchModelOptions& o, const Geometry& g) {
  if (g.n_attn == 0) return;  // a recurrent state does not grow with the context
  const uint64_t gen =
      o.gen.empty()
          ? 0
          : static_cast<uint64_t>(std::max(0, *std::max_element(o.gen.begin(), o.gen.end())));
  const uint64_t limit = bench::memory_limit_bytes();
  for (int d : o.depth) {
    const uint64_t rows = static_cast<uint64_t>(std::max(d, 0)) + gen;
    const uint64_t cache = 2ull * g.n_attn * rows * static_cast<uint64_t>(g.n_embd) * sizeof(float);
    const uint64_t need = cache / 2 * 7;
    if (need > limit) {
      throw InputError(fmt::format(
          "--depth {} needs about {:.1f} GiB for the KV caches ({} attention blocks x K and V x "
          "{} rows x {} floats = {:.1f} GiB, held about 3.5 times while decoding) but this "
          "process can use {:.1f} GiB of memory; lower --depth (or --gen)",
          d, need / 1073741824.0, g.n_attn, rows, g.n_embd, cache / 1073741824.0,
          limit / 1073741824.0));
    }
  }
}

void run_bench_model(const BenchModelOptions& o) {
  if (o.threads > 0) set_cli_threads(o.threads);
  const uint64_t rss_before = bench::resident_bytes();
  bench::reset_peak_resident();
  const auto t_load = Clock::now();
  const Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  const double load_s = seconds_since(t_load);
  check_depth_fits(o, model.geometry());
  const uint64_t rss_loaded = bench::resident_bytes();
  const uint64_t peak_load = bench::peak_resident_bytes();
  // The weights are mapped, not read, at load: the first step pages them in (cold cache: from
  // disk), so it is timed separately.
  double first_step_ms = 0;
  {
    State st = model.new_state();
    const auto t0 = Clock::now();
    model.step(0, st);
    first_step_ms = seconds_since(t0) * 1000;
  }
  const ModelInfo& info = model.info();
  const Geometry& g = model.geometry();
  const std::string format = weight_format(info);
  const int nthreads = cli_runtime()->threads();

  auto emit = [&](const std::string& test, int n_prompt, int n_gen, const bench::Summary& tps,
                  nlohmann::json extra) {
    const double ms = 1000.0 / tps.median;
    if (o.json) {
      nlohmann::json j = {
          {"test", test},
          {"model", info.source},
          {"n_prompt", n_prompt},
          {"n_gen", n_gen},
          {"threads", nthreads},
          {"isa", kernel_isa()},
          {"weight_format", format},
          {"precision", precision_name(model.precision())},
          {"size_bytes", info.weight_bytes},
          {"tokens_per_s", tps.median},
          {"stddev", tps.stddev},
          {"ms_per_token", ms},
          {"reps", o.reps},
          {"load_ms", load_s * 1000},
          {"first_step_ms", first_step_ms},
          {"rss_after_load_bytes", rss_loaded - std::min(rss_loaded, rss_before)},
          {"peak_rss_during_load_bytes", peak_load - std::min(peak_load, rss_before)}};
      j.update(extra);
      std::cout << j.dump() << "\n" << std::flush;
    } else {
      std::string more;
      for (auto& [k, v] : extra.items()) {
        if (v.is_number_float())
          more += fmt::format("  {} {:.3g}", k, v.get<double>());
        else
          more += fmt::format("  {} {}", k, v.dump());
      }
      fmt::print("{:<28} {:<14} {:>9.1f} MiB {:>7} {:>9.1f} ± {:<7.1f} {:>8.2f}{}\n",
                 info.source.size() > 28 ? "..." + info.source.substr(info.source.size() - 25)
                                         : info.source,
                 format, info.weight_bytes / 1048576.0, test, tps.median, tps.stddev, ms, more);
    }
  };
  if (!o.json) {
    fmt::print(
        "load {:.0f} ms (first step {:.0f} ms), resident after load {:.1f} MiB (peak during "
        "load {:.1f} MiB), {} threads, {} kernels, {} matmul inputs\n",
        load_s * 1000, first_step_ms, (rss_loaded - std::min(rss_loaded, rss_before)) / 1048576.0,
        (peak_load - std::min(peak_load, rss_before)) / 1048576.0, nthreads, kernel_isa(),
        precision_name(model.precision()));
    fmt::print("{:<28} {:<14} {:>13} {:>7} {:>19} {:>8}\n", "model", "format", "size", "test",
               "tokens/s", "ms/tok");
  }

  for (int n : o.prompt) {
    if (n <= 0) continue;
    const std::vector<int32_t> tokens = bench_tokens(n, g.vocab, 1);
    {
      // One untimed pass of the whole prompt: the pass workspace grows to n rows here (a first
      // pass of n rows pays its page faults and zeroing, 2-4 % of a 512-token prefill on the
      // 0.1B), so every timed repetition measures the steady state a server sees.
      State warm = model.new_state();
      model.forward(tokens, warm);
    }
    bench::reset_peak_resident();
    // The fp32 FMA peak is measured right after every repetition, as the bandwidth is for decode;
    // at bf16 precision with bf16 weights (most parameters) where the BF16 dot product runs (the
    // CPU has it and WICK_ISA does not cap it), its peak too: the limit of the kernel there.
    const bool bf16_limit = products_run_bf16_dot(model);
    std::vector<double> tps, peaks, bf16_peaks;
    bench::FmaPeakResult fma;
    for (int r = 0; r < o.reps; ++r) {
      State st = model.new_state();
      const auto t0 = Clock::now();
      model.forward(tokens, st);
      tps.push_back(n / seconds_since(t0));
      fma = bench::measure_fma_peak({.threads = nthreads});
      peaks.push_back(fma.flops_per_s);
      if (bf16_limit)
        bf16_peaks.push_back(bench::measure_bf16_dot_peak({.threads = nthreads}).flops_per_s);
    }
    const uint64_t peak = bench::peak_resident_bytes();
    const bench::Summary s = bench::summarize(tps);
    const double flops = bench::prefill_flops_per_token(g, n), fma_peak = bench::median(peaks);
    nlohmann::json extra = {{"peak_rss_during_prefill_bytes", peak - std::min(peak, rss_before)},
                            {"flops_per_token", flops},
                            {"gflop_s", flops * s.median / 1e9},
                            {"fma_peak_gflop_s", fma_peak / 1e9},
                            {"fma_peak_fraction", bench::peak_fraction(flops * s.median, fma_peak)},
                            {"probe_isa", fma.isa}};
    if (bf16_limit) {
      const double bf16_peak = bench::median(bf16_peaks);
      extra["bf16_dot_peak_gflop_s"] = bf16_peak / 1e9;
      extra["bf16_dot_peak_fraction"] = bench::peak_fraction(flops * s.median, bf16_peak);
    }
    emit("pp" + std::to_string(n), n, 0, s, extra);
  }
  for (int d : o.depth) {
    const State start = state_at_depth(model, d);
    for (int n : o.gen) {
      if (n <= 0) continue;
      const std::vector<int32_t> tokens = bench_tokens(n, g.vocab, 2);
      {
        State warm = start;
        for (int i = 0; i < std::min(n, 4); ++i) model.step(tokens[i], warm);
      }
      // The bandwidth is measured right after every repetition and its median taken, so the
      // roofline sees the same conditions of this shared machine as the median decode figure.
      std::vector<double> tps, bws;
      bench::BandwidthResult probe;
      uint64_t rss_decode = 0, huge_decode = 0;
      for (int r = 0; r < o.reps; ++r) {
        State st = start;
        const auto t0 = Clock::now();
        for (int32_t t : tokens) model.step(t, st);
        tps.push_back(n / seconds_since(t0));
        rss_decode = std::max(rss_decode, bench::resident_bytes());
        huge_decode = std::max(huge_decode, bench::huge_page_resident_bytes());
        probe =
            bench::measure_read_bandwidth({.threads = nthreads,
                                           .bytes = static_cast<uint64_t>(o.bandwidth_mib) << 20,
                                           .passes = 3});
        bws.push_back(probe.bytes_per_s);
      }
      const bench::Summary s = bench::summarize(tps);
      const double bw = bench::median(bws);
      // Bytes a step reads: the weights, plus (RWKV-X) the K and V rows it attends to at the
      // middle of the run, for full attention.
      // moba reads about n_past + 1/2 blocks of rows (the chosen ones and the current partial one)
      // plus one mean key per complete block; an estimate, as the partial block varies.
      const uint64_t kv_row_bytes = 2ull * g.n_attn * g.n_embd * sizeof(float);
      const AttentionOptions& a = model.attention();
      const double mid = d + n / 2.0;
      double rows = mid;
      if (a.mode == AttentionMode::kMoba) {
        const double n_past = a.moba_past_k_minus_1 ? a.moba_topk - 1 : a.moba_topk;
        rows = std::min(mid, (n_past + 0.5) * static_cast<double>(a.moba_block)) +
               0.5 * mid / static_cast<double>(a.moba_block);
      }
      const uint64_t kv_bytes = g.n_attn > 0 ? static_cast<uint64_t>(rows * kv_row_bytes) : 0;
      const double roofline_ms =
          1000.0 *
          bench::roofline_seconds(static_cast<double>(info.bytes_per_token + kv_bytes), bw);
      nlohmann::json extra = {
          {"rss_while_decoding_bytes", rss_decode - std::min(rss_decode, rss_before)},
          // The process's resident bytes in huge pages after each repetition, the largest (the
          // weights' mapping above all): a large model decodes measurably faster the more of
          // its weights are in them.
          {"huge_page_bytes", huge_decode},
          {"bytes_per_token", info.bytes_per_token + kv_bytes},
          {"bandwidth_gb_s", bw / 1e9},
          {"roofline_ms_per_token", roofline_ms},
          {"roofline_fraction", bench::roofline_fraction(roofline_ms, 1000.0 / s.median)},
          {"bandwidth_probe_bytes", probe.bytes_read},
          {"probe_isa", probe.isa}};
      if (g.n_attn > 0) {
        extra["n_depth"] = d;
        extra["attention"] = describe_attention(model.attention());
      }
      emit("tg" + std::to_string(n) + (d > 0 ? "@d" + std::to_string(d) : ""), 0, n, s, extra);
    }
  }
}

}  // namespace

void register_bench_model(CLI::App* bench) {
  auto o = std::make_shared<BenchModelOptions>();
  bench->add_option(
      "-m,--model", o->model,
      "Checkpoint (.safetensors, .pth, .rwkvq, HF folder); default: embedded tiny model");
  add_attention_flags(bench, &o->attention);
  add_load_options(bench, o->load);
  bench->add_option("-t,--threads", o->threads, "Threads (default: WICK_THREADS or one per core)")
      ->check(CLI::Range(1, 1024));
  bench->add_option("-p,--prompt", o->prompt, "Prefill lengths in tokens, comma-separated; 0 skips")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  bench->add_option("-n,--gen", o->gen, "Decode lengths in tokens, comma-separated; 0 skips")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  bench
      ->add_option("--depth", o->depth,
                   "Decode after this many tokens of context, comma-separated (RWKV-X: KV-cache "
                   "rows; default 0)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 24));
  bench->add_option("-r,--reps", o->reps, "Repetitions per test (median reported)")
      ->check(CLI::Range(1, 1000));
  bench
      ->add_option("--bandwidth-mib", o->bandwidth_mib,
                   "Working set of the read-bandwidth probe run after every decode repetition, "
                   "MiB over all threads (default 1024: far beyond the last-level cache)")
      ->check(CLI::Range(1, 1 << 20));
  bench->add_flag("--json", o->json, "One JSON object per test and line");
  bench->callback([o, bench] {
    if (bench->get_subcommands().empty()) run_bench_model(*o);
  });
}

}  // namespace wick::cli
