// src/bench, the benchmark library `wick bench*` and bench/ share: statistics on known inputs,
// the roofline arithmetic, the probes' bookkeeping on small working sets (a positive finite figure,
// every element read, FLOPs counted per ISA, options refused), /proc memory readings, and the new
// `wick bench --json` fields. Speed itself is never asserted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "bench/memory.h"
#include "bench/probes.h"
#include "bench/roofline.h"
#include "bench/stats.h"
#include "bench/timer.h"
#include "test_util.h"
#include "wick/model.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

TEST(BenchStats, MedianOfOddEvenAndEmptyInputs) {
  EXPECT_EQ(bench::median({3, 1, 2}), 2);
  EXPECT_EQ(bench::median({5, 1, 4, 2}), 3);  // mean of the middle two, 2 and 4
  EXPECT_EQ(bench::median({7}), 7);
  EXPECT_EQ(bench::median({}), 0);
  EXPECT_EQ(bench::median({1, 1, 100, 1, 1, 100}), 1);
}

TEST(BenchStats, QuantileIsTheNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 1..100, reversed
  EXPECT_EQ(bench::quantile(v, 0.99), 100);       // sorted[min(99, floor(99))]
  EXPECT_EQ(bench::quantile(v, 0.5), 51);         // sorted[50]
  EXPECT_EQ(bench::quantile(v, 0), 1);
  EXPECT_EQ(bench::quantile(v, 1), 100);
  EXPECT_EQ(bench::quantile(v, 7), 100);  // clamped
  EXPECT_EQ(bench::quantile({}, 0.5), 0);
}

TEST(BenchStats, SampleStandardDeviationAndSummary) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, squares sum to 32
  EXPECT_DOUBLE_EQ(bench::stddev(v), std::sqrt(32.0 / 7.0));
  EXPECT_EQ(bench::stddev({42}), 0);
  EXPECT_EQ(bench::stddev({}), 0);
  const bench::Summary s = bench::summarize(v);
  EXPECT_EQ(s.n, 8u);
  EXPECT_EQ(s.median, 4.5);
  EXPECT_EQ(s.mean, 5);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(32.0 / 7.0));
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(bench::summarize({}).n, 0u);
}

TEST(BenchTimer, MedianMsOfCallsTheFunctionRepsTimes) {
  int calls = 0;
  const double ms = bench::median_ms_of(5, [&] { ++calls; });
  EXPECT_EQ(calls, 5);
  EXPECT_GE(ms, 0);
  EXPECT_EQ((bench::median_ms_of(0, [&] { ++calls; }), calls), 6);  // at least once
  const bench::Clock::time_point t0 = bench::Clock::now();
  EXPECT_GE(bench::seconds_since(t0), 0);
}

TEST(BenchRoofline, FractionArithmetic) {
  // 281 MB a token at 10 GB/s: 28.1 ms; decoding at 35.125 ms/token reaches 80 % of it.
  EXPECT_DOUBLE_EQ(bench::roofline_seconds(281e6, 10e9), 0.0281);
  EXPECT_DOUBLE_EQ(bench::roofline_fraction(0.0281, 0.035125), 0.8);
  EXPECT_DOUBLE_EQ(bench::peak_fraction(60e9, 240e9), 0.25);
  EXPECT_EQ(bench::roofline_seconds(1, 0), 0);
  EXPECT_EQ(bench::roofline_fraction(1, 0), 0);
  EXPECT_EQ(bench::peak_fraction(1, 0), 0);
}

TEST(BenchRoofline, PrefillFlopsCountEveryMatrixOnceAndTheHeadOncePerPrompt) {
  Geometry g;
  g.n_layer = 2, g.n_embd = 4, g.ffn_dim = 16, g.vocab = 10;
  g.lora_w = 1, g.lora_a = 2, g.lora_g = 3, g.lora_v = 5;
  g.n_attn = 1, g.attn_ffn_dim = 8;
  // Per RWKV block 4*16 + 2*4*16 + 2*4*(1+2+3) = 240 weights, twice; the value LoRA 2*4*5 = 40
  // once (not in block 0); the attention block 4*16 + 2*4*8 = 128; the head 10*4 over 5 tokens.
  EXPECT_DOUBLE_EQ(bench::prefill_flops_per_token(g, 5), 2.0 * (480 + 40 + 128 + 8));
  EXPECT_EQ(bench::prefill_flops_per_token(g, 0), 0);
  // The 0.1B geometry: ~180 MFLOP a token without the head (README "Dense speed").
  const Geometry g01 = parse_synth_geometry("0.1b").geometry;
  const double per_token = bench::prefill_flops_per_token(g01, 1 << 30);
  EXPECT_GT(per_token, 175e6);
  EXPECT_LT(per_token, 185e6);
}

TEST(BenchRoofline, DecodeFlopsCountTheHeadEveryToken) {
  Geometry g;
  g.n_layer = 2, g.n_embd = 4, g.ffn_dim = 16, g.vocab = 10;
  g.lora_w = 1, g.lora_a = 2, g.lora_g = 3, g.lora_v = 5;
  // The blocks' 2 * 240 + 40 weights and the whole head, 10 * 4, every token.
  EXPECT_DOUBLE_EQ(bench::decode_flops_per_token(g), 2.0 * (480 + 40 + 40));
  g.vocab = 20;  // a larger head costs every decoded token
  EXPECT_DOUBLE_EQ(bench::decode_flops_per_token(g), 2.0 * (480 + 40 + 80));
}

TEST(BenchRoofline, BatchDecodeLimitIsTheLongerOfReadingAndComputing) {
  // 1 GFLOP and 1 GB a token, 100 GFLOP/s and 10 GB/s: one row reads for 0.1 s (10 tok/s); 10
  // rows compute for 0.1 s as they read (100 tok/s); 20 rows compute for 0.2 s (still 100 tok/s).
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(1, 1e9, 100e9, 1e9, 10e9), 10);
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(4, 1e9, 100e9, 1e9, 10e9), 40);
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(10, 1e9, 100e9, 1e9, 10e9), 100);
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(20, 1e9, 100e9, 1e9, 10e9), 100);
  // Twice the bandwidth doubles a bandwidth-bound row, twice the peak a compute-bound batch.
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(1, 1e9, 100e9, 1e9, 20e9), 20);
  EXPECT_DOUBLE_EQ(bench::batch_decode_limit_tokens_per_s(20, 1e9, 200e9, 1e9, 10e9), 200);
  // No limit from a missing figure.
  EXPECT_EQ(bench::batch_decode_limit_tokens_per_s(0, 1e9, 100e9, 1e9, 10e9), 0);
  EXPECT_EQ(bench::batch_decode_limit_tokens_per_s(4, 1e9, 0, 1e9, 10e9), 0);
  EXPECT_EQ(bench::batch_decode_limit_tokens_per_s(4, 1e9, 100e9, 1e9, 0), 0);
  EXPECT_EQ(bench::batch_decode_limit_tokens_per_s(4, 0, 100e9, 1e9, 10e9), 0);
}

TEST(BenchProbes, ReadBandwidthOnASmallBufferReadsEveryElement) {
  bench::BandwidthOptions o;
  o.threads = 2;
  o.bytes = 8u << 20;
  o.passes = 3;
  const bench::BandwidthResult r = bench::measure_read_bandwidth(o);
  EXPECT_EQ(r.bytes_read, 8u << 20);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.isa, bench::probe_isa());
  ASSERT_EQ(r.pass_seconds.size(), 3u);
  EXPECT_TRUE(std::isfinite(r.bytes_per_s));
  EXPECT_GT(r.bytes_per_s, 0);
  EXPECT_GE(r.best_bytes_per_s, r.bytes_per_s);
  // Every element is 1.0f: the sum over both shares counts the floats read.
  EXPECT_EQ(r.checksum, static_cast<double>(r.bytes_read / sizeof(float)));
}

TEST(BenchProbes, ReadBandwidthRoundsSharesDownToWholePagesAndRefusesBadOptions) {
  bench::BandwidthOptions o;
  o.threads = 3;
  o.bytes = (1u << 20) + 12345;
  o.passes = 1;
  const bench::BandwidthResult r = bench::measure_read_bandwidth(o);
  EXPECT_EQ(r.bytes_read % (3 * 4096), 0u);
  EXPECT_LE(r.bytes_read, o.bytes);
  EXPECT_GT(r.bytes_read, o.bytes - 3 * 4096);
  EXPECT_EQ(r.checksum, static_cast<double>(r.bytes_read / sizeof(float)));
  EXPECT_THROW(bench::measure_read_bandwidth({.threads = 0}), std::invalid_argument);
  EXPECT_THROW(bench::measure_read_bandwidth({.threads = 4, .bytes = 4096}), std::invalid_argument);
  EXPECT_THROW(bench::measure_read_bandwidth({.threads = 1, .bytes = 1 << 20, .passes = 0}),
               std::invalid_argument);
}

TEST(BenchProbes, FmaPeakCountsTwoFlopsPerLaneOfTwelveChains) {
  const bench::FmaPeakResult r =
      bench::measure_fma_peak({.threads = 2, .iterations = 1000, .passes = 2});
  const int lanes = r.isa == "avx512" ? 16 : r.isa == "avx2" ? 8 : 4;
  EXPECT_EQ(r.isa, bench::probe_isa());
  EXPECT_EQ(r.flops, 2.0 * lanes * 12 * 1000 * 2);
  ASSERT_EQ(r.pass_seconds.size(), 2u);
  EXPECT_TRUE(std::isfinite(r.flops_per_s));
  EXPECT_GT(r.flops_per_s, 0);
  EXPECT_THROW(bench::measure_fma_peak({.threads = 1, .iterations = 0}), std::invalid_argument);
  EXPECT_THROW(bench::measure_fma_peak({.threads = 0}), std::invalid_argument);
}

TEST(BenchProbes, Bf16DotPeakCountsSixtyFourFlopsPerInstructionOrRefuses) {
  if (!bench::has_bf16_dot_peak()) {
    EXPECT_THROW(bench::measure_bf16_dot_peak({.threads = 1, .iterations = 10}),
                 std::runtime_error);
    return;
  }
  const bench::FmaPeakResult r =
      bench::measure_bf16_dot_peak({.threads = 2, .iterations = 1000, .passes = 2});
  EXPECT_EQ(r.isa, "avx512-bf16");
  EXPECT_EQ(r.flops, 64.0 * 12 * 1000 * 2);
  ASSERT_EQ(r.pass_seconds.size(), 2u);
  EXPECT_GT(r.flops_per_s, 0);
  EXPECT_THROW(bench::measure_bf16_dot_peak({.threads = 0}), std::invalid_argument);
}

TEST(BenchMemory, ResidentSizeGrowsWithTouchedPagesAndThePeakFollows) {
  const uint64_t before = bench::resident_bytes();
  ASSERT_GT(before, 0u) << "/proc/self/status has no VmRSS";
  std::vector<char> block(64u << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  const uint64_t after = bench::resident_bytes();
  EXPECT_GE(after, before + (48u << 20));
  EXPECT_GE(bench::peak_resident_bytes(), after);
  block.clear();
  block.shrink_to_fit();
  // The reset brings the peak down to the resident size of the moment (whether or not the
  // allocator gave the block back to the system).
  if (bench::reset_peak_resident()) {
    const uint64_t peak = bench::peak_resident_bytes(), now = bench::resident_bytes();
    EXPECT_LT(peak - std::min(peak, now), 8u << 20) << peak << " vs " << now;
  }
  EXPECT_GT(bench::memory_limit_bytes(), 0u);
}

// huge_page_bytes_of_smaps sums the three huge-page lines of an smaps_rollup text (a real one's
// shape, Linux 6.x), in bytes, and nothing else.
TEST(BenchMemory, HugePageBytesAreTheSumOfTheHugePageLines) {
  const std::string rollup =
      "55d0c0000000-7ffd3c1d6000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:             3368224 kB\n"
      "Pss:             3366104 kB\n"
      "Pss_File:        2999472 kB\n"
      "Shared_Hugetlb:        0 kB\n"
      "AnonHugePages:      4096 kB\n"
      "ShmemPmdMapped:     2048 kB\n"
      "FilePmdMapped:   2822144 kB\n"
      "Private_Hugetlb:       0 kB\n"
      "Swap:                  0 kB\n";
  std::istringstream in(rollup);
  EXPECT_EQ(bench::huge_page_bytes_of_smaps(in), (4096ull + 2048 + 2822144) * 1024);
  // Other counts give another sum; hugetlbfs pages and look-alike keys are not counted.
  std::istringstream other(
      "Rss: 100 kB\nAnonHugePages: 2048 kB\nFilePmdMapped: 0 kB\nShared_Hugetlb: 4096 kB\n"
      "AnonHugePagesX: 2048 kB\n");
  EXPECT_EQ(bench::huge_page_bytes_of_smaps(other), 2048ull * 1024);
  std::istringstream none("");
  EXPECT_EQ(bench::huge_page_bytes_of_smaps(none), 0u);
  // This process's own figure is part of what it has resident (a loose bound: the two come from
  // different files, read at different moments).
  EXPECT_LE(bench::huge_page_resident_bytes(), bench::resident_bytes() + (64u << 20));
}

// The fields `wick bench --json` adds beside the contract ones (tests/cli/test_cli_bench.cpp).
TEST(BenchCli, JsonCarriesTheProbesFigures) {
  const CliRun r =
      run_wick("bench --threads 2 --prompt 16 --gen 4 --reps 2 --bandwidth-mib 16 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const nlohmann::json& pp = lines[0];
  const nlohmann::json& tg = lines[1];
  EXPECT_EQ(pp["test"], "pp16");
  EXPECT_GT(pp["flops_per_token"].get<double>(), 0);
  EXPECT_GT(pp["fma_peak_gflop_s"].get<double>(), 0);
  EXPECT_GT(pp["fma_peak_fraction"].get<double>(), 0);
  EXPECT_NEAR(pp["gflop_s"].get<double>(),
              pp["flops_per_token"].get<double>() * pp["tokens_per_s"].get<double>() / 1e9, 1e-9);
  EXPECT_EQ(pp["probe_isa"], bench::probe_isa());
  EXPECT_EQ(tg["test"], "tg4");
  EXPECT_EQ(tg["bandwidth_probe_bytes"], 16u << 20);
  EXPECT_GT(tg["bandwidth_gb_s"].get<double>(), 0);
  EXPECT_TRUE(tg["huge_page_bytes"].is_number_unsigned()) << tg.dump();
  EXPECT_EQ(tg["probe_isa"], bench::probe_isa());
  // roofline_fraction = roofline ms / measured ms.
  EXPECT_NEAR(tg["roofline_fraction"].get<double>(),
              tg["roofline_ms_per_token"].get<double>() / tg["ms_per_token"].get<double>(), 1e-9);
  EXPECT_NE(run_wick("bench --bandwidth-mib 0").status, 0);
  // The BF16 dot peak joins the prefill record at bf16 precision of bf16 weights where the CPU
  // has one (not for the fp32 default model, whose products keep the fp32 kernels), and the
  // limits command names it.
  const std::string synth = (std::filesystem::temp_directory_path() /
                             ("wick-bench-bf16-" + std::to_string(::getpid()) + ".safetensors"))
                                .string();
  write_synthetic_checkpoint(synth, parse_synth_geometry("2:128:256"), DType::BF16, 3);
  const CliRun b = run_wick("bench --model " + synth +
                            " --threads 2 --prompt 16 --gen 0 --reps 1 --precision bf16 --json");
  const CliRun f = run_wick("bench --threads 2 --prompt 16 --gen 0 --reps 1 --precision bf16 --json");
  // WICK_ISA below avx512 runs the fp32 kernels on the same CPU: no BF16 limit then.
  ::setenv("WICK_ISA", "scalar", 1);
  const CliRun capped = run_wick("bench --model " + synth +
                                 " --threads 2 --prompt 16 --gen 0 --reps 1 --precision bf16 --json");
  ::unsetenv("WICK_ISA");
  std::filesystem::remove(synth);
  ASSERT_EQ(capped.status, 0) << capped.err;
  EXPECT_EQ(capped.out.find("bf16_dot_peak"), std::string::npos) << capped.out;
  ASSERT_EQ(b.status, 0) << b.err;
  ASSERT_EQ(f.status, 0) << f.err;
  const nlohmann::json bp = nlohmann::json::parse(b.out.substr(0, b.out.find('\n')));
  EXPECT_EQ(bp.contains("bf16_dot_peak_fraction"), bench::has_bf16_dot_peak()) << b.out;
  EXPECT_FALSE(nlohmann::json::parse(f.out.substr(0, f.out.find('\n')))
                   .contains("bf16_dot_peak_fraction"));
  EXPECT_FALSE(pp.contains("bf16_dot_peak_fraction"));  // fp32 precision: not the limit
  const CliRun lim = run_wick("bench limits --threads 1 --passes 1 --bandwidth-mib 16 --json");
  ASSERT_EQ(lim.status, 0) << lim.err;
  EXPECT_EQ(nlohmann::json::parse(lim.out).contains("bf16_dot_peak_gflop_s"),
            bench::has_bf16_dot_peak())
      << lim.out;
}

}  // namespace
}  // namespace wick::test
