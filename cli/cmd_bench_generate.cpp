// wick bench generate [--model F] [--prompt-tokens N] [--gen N] [--reps R] [--batch 1,4,8]
//                     [--bandwidth-mib 1024] [--json]
// Decode speed as users see it through generate(): ms/token greedy vs with sampling (temperature
// + top-p + penalties; the difference is the sampler's overhead), and batch generation throughput
// at several row counts vs the same rows generated one by one. The variants run interleaved in
// every repetition (this machine is shared and noisy) and medians are reported. Each repetition
// also measures the peak of the products' arithmetic (the fp32 FMA peak; the BF16 dot peak where
// they run vdpbf16ps) and the read bandwidth (bench/probes.h), and each batch figure is judged
// against the limit they set (bench/roofline.h batch_decode_limit_tokens_per_s): its FLOP rate as
// a fraction of the peak, and the largest speed-up over one row the machine allows. Products in
// integers (int8 weights or precision) are not judged: no probe measures their peak.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench/probes.h"
#include "bench/roofline.h"
#include "bench/stats.h"
#include "bench/timer.h"
#include "bench_format.h"
#include "commands.h"
#include "common.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/runtime.h"

namespace wick::cli {
namespace {

struct BenchGenerateOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model, tokenizer;
  int prompt_tokens = 64;
  int gen = 64;
  int reps = 3;
  std::vector<int> batch = {1, 4, 8};
  int bandwidth_mib = 1024;  // the bandwidth probe's working set, all threads together
  bool json = false;
};

using bench::median;
using bench::seconds_of;

// A prompt of exactly n tokens: ids of some English text, repeated.
std::vector<int32_t> make_prompt(const Tokenizer& tok, int n, int salt) {
  const std::vector<int32_t> base = tok.encode(
      "The history of the printing press begins with movable type, paper and ink, and the "
      "workshops where they met. " +
      std::to_string(salt));
  std::vector<int32_t> p;
  while (static_cast<int>(p.size()) < n) p.push_back(base[(p.size() + salt) % base.size()]);
  return p;
}

void run_bench_generate(const BenchGenerateOptions& o) {
  const Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  const auto tok = tokenizer_for(model, o.tokenizer);
  GenerationConfig greedy;
  greedy.max_tokens = o.gen;
  GenerationConfig sampled = greedy;
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.top_p = 0.9f;
  sampled.sampling.top_k = 0;
  sampled.sampling.presence_penalty = 0.2f;
  sampled.sampling.frequency_penalty = 0.2f;
  sampled.sampling.penalty_decay = 0.996f;
  const std::vector<int32_t> prompt = make_prompt(*tok, o.prompt_tokens, 0);

  // Per-token decode time of one generate() call (prefill excluded).
  auto decode_ms_per_token = [&](const GenerationConfig& c, double* sample_ms) {
    State st = model.new_state();
    const GenerationResult r = generate_tokens(model, *tok, prompt, c, st);
    if (sample_ms) *sample_ms = r.timings.sample_ms / std::max(1, r.timings.decode_steps);
    return r.timings.decode_ms / std::max(1, r.timings.decode_steps);
  };
  std::vector<double> g_ms, s_ms, s_sample_ms, peaks, bws;
  std::map<int, std::vector<double>> batch_tps, single_tps;
  const int nthreads = cli_runtime()->threads();
  const bool judged = model.precision() != Precision::kInt8 &&
                      model.info().quantization != WeightQuantization::kInt8;
  const bool bf16_dot = products_run_bf16_dot(model);
  std::string probe_isa;
  for (int rep = 0; rep < o.reps; ++rep) {
    g_ms.push_back(decode_ms_per_token(greedy, nullptr));
    double sm = 0;
    s_ms.push_back(decode_ms_per_token(sampled, &sm));
    s_sample_ms.push_back(sm);
    for (int B : o.batch) {
      std::vector<std::vector<int32_t>> prompts;
      for (int b = 0; b < B; ++b) prompts.push_back(make_prompt(*tok, o.prompt_tokens, b));
      const double tb = seconds_of([&] {
        generate_batch(model, *tok, prompts, std::span<const GenerationConfig>(&greedy, 1));
      });
      const double ts = seconds_of([&] {
        for (int b = 0; b < B; ++b) {
          State st = model.new_state();
          generate_tokens(model, *tok, prompts[b], greedy, st);
        }
      });
      batch_tps[B].push_back(B * o.gen / tb);
      single_tps[B].push_back(B * o.gen / ts);
    }
    // The limits, right after the repetition's runs (the same conditions of a shared machine).
    if (!judged) continue;
    const bench::FmaPeakResult p = bf16_dot ? bench::measure_bf16_dot_peak({.threads = nthreads})
                                            : bench::measure_fma_peak({.threads = nthreads});
    peaks.push_back(p.flops_per_s);
    probe_isa = p.isa;
    bws.push_back(
        bench::measure_read_bandwidth({.threads = nthreads,
                                       .bytes = static_cast<uint64_t>(o.bandwidth_mib) << 20,
                                       .passes = 3})
            .bytes_per_s);
  }
  const Geometry& g = model.geometry();
  const double gm = median(g_ms), sm = median(s_ms);
  // A batch figure against its limit. Its FLOPs are the generated tokens' products (each with its
  // logits); the prompts' prefill is left out, so the rate and its fraction are lower bounds. A
  // step reads the weights once for all its rows (ModelInfo::bytes_per_token; RWKV-X's K and V
  // rows not counted) from memory: a model that fits the last-level cache can pass the limit.
  const double flops = bench::decode_flops_per_token(g);
  const double peak = judged ? median(peaks) : 0, bw = judged ? median(bws) : 0;
  const auto bytes = static_cast<double>(model.info().bytes_per_token);
  const std::string peak_name = bf16_dot ? "bf16_dot_peak" : "fma_peak";
  struct Judged {
    double gflop_s, peak_fraction, limit_tps, limit_fraction, speedup, speedup_limit;
  };
  const auto judge = [&](int B) {
    const double tps = median(batch_tps[B]), one = median(single_tps[B]);
    const double limit = bench::batch_decode_limit_tokens_per_s(B, flops, peak, bytes, bw);
    return Judged{tps * flops / 1e9,
                  bench::peak_fraction(tps * flops, peak),
                  limit,
                  bench::peak_fraction(tps, limit),
                  tps / one,
                  limit / one};
  };
  if (o.json) {
    auto line = [](const nlohmann::json& j) { std::cout << j.dump() << "\n"; };
    line({{"test", "decode_greedy"}, {"ms_per_token", gm}, {"n_gen", o.gen}});
    line({{"test", "decode_sampled"},
          {"ms_per_token", sm},
          {"sampler_ms_per_token", median(s_sample_ms)},
          {"overhead_pct", 100.0 * (sm - gm) / gm},
          {"n_gen", o.gen}});
    for (int B : o.batch) {
      const Judged j = judge(B);
      nlohmann::json r = {{"test", "batch"},
                          {"rows", B},
                          {"batch_tokens_per_s", median(batch_tps[B])},
                          {"one_by_one_tokens_per_s", median(single_tps[B])},
                          {"speedup", j.speedup},
                          {"threads", nthreads},
                          {"flops_per_token", flops},
                          {"gflop_s", j.gflop_s},
                          {"bytes_per_step", bytes}};
      if (judged) {
        r[peak_name + "_gflop_s"] = peak / 1e9;
        r[peak_name + "_fraction"] = j.peak_fraction;
        r["probe_isa"] = probe_isa;
        r["bandwidth_gb_s"] = bw / 1e9;
        r["limit_tokens_per_s"] = j.limit_tps;
        r["limit_fraction"] = j.limit_fraction;
        r["speedup_limit"] = j.speedup_limit;
      }
      line(r);
    }
    return;
  }
  fmt::print(
      "model      {} (L {}, C {}, vocab {}), prompt {} tokens, {} generated, {} reps "
      "(medians)\n",
      model.info().source, g.n_layer, g.n_embd, g.vocab, o.prompt_tokens, o.gen, o.reps);
  fmt::print("greedy     {:.3f} ms/token\n", gm);
  fmt::print(
      "sampled    {:.3f} ms/token (T 1, top-p 0.9, presence/frequency 0.2, decay 0.996): "
      "{:+.1f} %, of which the sampler {:.3f} ms/token\n",
      sm, 100.0 * (sm - gm) / gm, median(s_sample_ms));
  if (judged)
    fmt::print(
        "limits     {} {:.1f} GFLOP/s ({}), read bandwidth {:.1f} GB/s, {} threads; {:.1f} MFLOP a "
        "token, {:.1f} MB of weights a step\n",
        bf16_dot ? "BF16 dot peak" : "FMA peak", peak / 1e9, probe_isa, bw / 1e9, nthreads,
        flops / 1e6, bytes / 1e6);
  else
    fmt::print(
        "limits     not judged: the products run in integers (int8), whose peak no probe "
        "measures\n");
  fmt::print("{:>6} {:>16} {:>16} {:>8} {:>8}", "rows", "batch tok/s", "one-by-one tok/s",
             "speedup", "GFLOP/s");
  if (judged)
    fmt::print(" {:>7} {:>12} {:>8} {:>12}", "% peak", "limit tok/s", "% limit", "max speedup");
  fmt::print("\n");
  for (int B : o.batch) {
    const Judged j = judge(B);
    fmt::print("{:>6} {:>16.1f} {:>16.1f} {:>7.2f}x {:>8.1f}", B, median(batch_tps[B]),
               median(single_tps[B]), j.speedup, j.gflop_s);
    if (judged)
      fmt::print(" {:>6.0f}% {:>12.1f} {:>7.0f}% {:>11.2f}x", 100 * j.peak_fraction, j.limit_tps,
                 100 * j.limit_fraction, j.speedup_limit);
    fmt::print("\n");
  }
}

}  // namespace

void register_bench_generate(CLI::App* bench) {
  auto o = std::make_shared<BenchGenerateOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "generate", "Decode ms/token greedy vs sampled, and batch generation speed-up");
  cmd->add_option(
      "-m,--model", o->model,
      "Checkpoint; default: the embedded tiny model (try `wick synth --geometry 0.1b`)");
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  cmd->add_option("--tokenizer", o->tokenizer, "Tokenizer file; default as for generate");
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Prompt length in tokens (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen", o->gen, "Tokens generated per row (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--reps", o->reps, "Repetitions (medians reported; default 3)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--batch", o->batch, "Row counts for the batch test (default 1,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--bandwidth-mib", o->bandwidth_mib,
                  "Working set of the read-bandwidth probe run after every repetition, MiB over "
                  "all threads (default 1024: far beyond the last-level cache)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--json", o->json, "One JSON object per test and line");
  cmd->callback([o] { run_bench_generate(*o); });
}

}  // namespace wick::cli
