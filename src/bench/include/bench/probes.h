// The machine's limits, measured in the same run as the figures judged against them (wick's
// benchmark library): the memory read bandwidth (the decode roofline) and the fp32 FMA peak (the
// prefill roofline). Both run on the best instruction set the CPU has - AVX-512F, else AVX2 + FMA,
// else SSE2 (kernels/cpu_features.h's best_supported_isa(); WICK_ISA does not lower it: they
// measure the machine, not the kernels' choice) - with their own threads.
//
// Thread-safety: each call starts and joins its own threads and shares nothing; two probes run
// at once disturb each other's figures, nothing else. Errors: std::invalid_argument for options
// out of range (threads < 1, a buffer smaller than one share per thread, passes < 1),
// std::bad_alloc when the buffer cannot be mapped, std::system_error when a thread cannot start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wick::bench {

struct BandwidthOptions {
  int threads = 1;              // readers; each reads its own contiguous share
  uint64_t bytes = 1ull << 30;  // working set in bytes (all threads together): far beyond the
                                // last-level cache for a memory figure (default 1 GiB)
  int passes = 5;               // timed passes (after one untimed warm-up pass)
};

struct BandwidthResult {
  double bytes_per_s = 0;            // median over the passes, bytes (not GiB) per second
  double best_bytes_per_s = 0;       // fastest pass
  std::vector<double> pass_seconds;  // wall time of each timed pass
  uint64_t bytes_read = 0;           // bytes one pass reads (the working set rounded down to whole
                                     // blocks of 8 vectors per thread)
  int threads = 0;
  std::string isa;      // "avx512", "avx2" or "sse2"
  double checksum = 0;  // sum of the elements read by the last pass: every element is
                        // 1.0f, so it equals bytes_read / 4 while that is exact in
                        // float lanes (it keeps the loads from being optimised away)
};

// Memory read bandwidth: an mmap'd buffer of options.bytes, each thread first-touching (writing
// 1.0f into) its own share and then summing it with 8 independent vector accumulators (aligned
// full-width loads: 8 x 64 bytes per step on AVX-512), all threads started together on a barrier;
// a pass's time runs from the barrier releasing them to the last one finishing. The figure is
// bytes_read / median pass time - what a GEMV streaming weights from DRAM can reach at best,
// validated against ../shared/tools/membw.c's "read" (README "Benchmarks").
BandwidthResult measure_read_bandwidth(const BandwidthOptions& options);

struct FmaPeakOptions {
  int threads = 1;
  int64_t iterations = 1 << 22;  // FMA steps of every chain per pass
  int passes = 3;                // timed passes (after one untimed warm-up pass)
};

struct FmaPeakResult {
  double flops_per_s = 0;  // median over the passes; an FMA counts as 2 FLOPs per lane
  double best_flops_per_s = 0;
  std::vector<double> pass_seconds;
  double flops = 0;  // FLOPs one pass performs (all threads)
  int threads = 0;
  std::string isa;  // "avx512", "avx2" (FMA3) or "sse2" (a multiply and an add)
};

// The fp32 FMA peak: every thread runs 12 independent vector FMA chains (enough to cover the FMA
// latency on two pipes) in registers, no memory traffic; the prefill roofline.
FmaPeakResult measure_fma_peak(const FmaPeakOptions& options);

// The BF16 dot-product peak (vdpbf16ps), the limit of the --precision bf16 GEMM: every thread
// runs 12 independent chains of it in registers; each instruction counts 64 FLOPs (32 products,
// 32 additions), as a GEMM counts 2 FLOPs per weight. isa "avx512-bf16". Only on CPUs with
// AVX-512 BF16: throws std::runtime_error elsewhere (see has_bf16_dot_peak()).
FmaPeakResult measure_bf16_dot_peak(const FmaPeakOptions& options);
bool has_bf16_dot_peak();

// The instruction set the probes use on this CPU ("avx512", "avx2", "sse2").
std::string probe_isa();

}  // namespace wick::bench
