// wick bench limits [--threads N] [--bandwidth-mib 1024] [--passes 10] [--json]
// The two limits `wick bench` judges its figures against, measured alone (src/bench's probes,
// bench/probes.h): the memory read bandwidth (decode's roofline) and the fp32 FMA peak
// (prefill's), with the median and best pass of each. This is the figure README "Benchmarks"
// compares with ../shared/tools/membw.c's "read" median.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench/probes.h"
#include "commands.h"
#include "common.h"

namespace wick::cli {
namespace {

struct BenchLimitsOptions {
  int threads = 0;
  int bandwidth_mib = 1024;
  int passes = 10;
  bool json = false;
};

void run_bench_limits(const BenchLimitsOptions& o) {
  if (o.threads > 0) set_cli_threads(o.threads);
  const int threads = cli_runtime()->threads();
  const bench::BandwidthResult bw =
      bench::measure_read_bandwidth({.threads = threads,
                                     .bytes = static_cast<uint64_t>(o.bandwidth_mib) << 20,
                                     .passes = o.passes});
  const bench::FmaPeakResult fma =
      bench::measure_fma_peak({.threads = threads, .passes = o.passes});
  // The BF16 dot-product peak where the CPU has it (the --precision bf16 GEMM's limit).
  std::optional<bench::FmaPeakResult> bf16;
  if (bench::has_bf16_dot_peak())
    bf16 = bench::measure_bf16_dot_peak({.threads = threads, .passes = o.passes});
  if (o.json) {
    nlohmann::json j{{"test", "limits"},
                     {"threads", threads},
                     {"probe_isa", bw.isa},
                     {"bandwidth_probe_bytes", bw.bytes_read},
                     {"passes", o.passes},
                     {"bandwidth_gb_s", bw.bytes_per_s / 1e9},
                     {"bandwidth_best_gb_s", bw.best_bytes_per_s / 1e9},
                     {"fma_peak_gflop_s", fma.flops_per_s / 1e9},
                     {"fma_peak_best_gflop_s", fma.best_flops_per_s / 1e9}};
    if (bf16) {
      j["bf16_dot_peak_gflop_s"] = bf16->flops_per_s / 1e9;
      j["bf16_dot_peak_best_gflop_s"] = bf16->best_flops_per_s / 1e9;
    }
    std::cout << j.dump() << "\n";
    return;
  }
  fmt::print(
      "read bandwidth  median {:.1f} GB/s, best {:.1f} GB/s ({} threads, {} MiB, {} "
      "passes, {})\n",
      bw.bytes_per_s / 1e9, bw.best_bytes_per_s / 1e9, threads, bw.bytes_read >> 20, o.passes,
      bw.isa);
  fmt::print(
      "fp32 FMA peak   median {:.1f} GFLOP/s, best {:.1f} GFLOP/s ({} threads, {} passes, "
      "{})\n",
      fma.flops_per_s / 1e9, fma.best_flops_per_s / 1e9, threads, o.passes, fma.isa);
  if (bf16)
    fmt::print(
        "BF16 dot peak   median {:.1f} GFLOP/s, best {:.1f} GFLOP/s ({} threads, {} passes, "
        "{})\n",
        bf16->flops_per_s / 1e9, bf16->best_flops_per_s / 1e9, threads, o.passes, bf16->isa);
}

}  // namespace

void register_bench_limits(CLI::App* bench) {
  auto o = std::make_shared<BenchLimitsOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "limits",
      "Memory read bandwidth, fp32 FMA peak and (AVX-512 BF16 CPUs) BF16 dot peak: the limits "
      "`wick bench` reports against");
  cmd->add_option("-t,--threads", o->threads, "Threads (default: WICK_THREADS or one per core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--bandwidth-mib", o->bandwidth_mib,
                  "Working set of the bandwidth probe, MiB over all threads (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--passes", o->passes, "Timed passes of each probe (medians; default 10)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", o->json, "One JSON object");
  cmd->callback([o] { run_bench_limits(*o); });
}

}  // namespace wick::cli
