#include "bench/probes.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <functional>
#include <new>
#include <stdexcept>
#include <thread>

#include "bench/stats.h"
#include "bench/timer.h"
#include "kernels/cpu_features.h"
#include "probe_isa.h"

namespace wick::bench {
namespace {

const detail::ProbeTable& probe_table() {
  switch (kernels::best_supported_isa()) {
    case kernels::Isa::kAvx512:
      return detail::kProbeAvx512;
    case kernels::Isa::kAvx2:
      return detail::kProbeAvx2;
    case kernels::Isa::kScalar:
      break;
  }
  return detail::kProbeSse2;
}

// Runs `threads` threads: each calls prepare(t) once, then body(t) in passes + 1 passes, every
// pass started by all threads together on a barrier (the first pass warms up and is not timed).
// Returns the wall seconds of every timed pass: from the first thread starting its body to the
// last one finishing (each thread reads the clock itself, so a thread scheduled late cannot make
// a pass look shorter than the work it contains).
std::vector<double> timed_passes(int threads, int passes, const std::function<void(int)>& prepare,
                                 const std::function<void(int)>& body) {
  std::barrier sync(threads);
  std::atomic<bool> abandoned{false};
  // begin/end[p * threads + t]: when thread t started and finished pass p.
  std::vector<Clock::time_point> begin(static_cast<size_t>(passes + 1) * threads),
      end(begin.size());
  std::vector<std::thread> pool;
  pool.reserve(threads);
  try {
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        prepare(t);
        for (int p = 0; p <= passes; ++p) {
          sync.arrive_and_wait();
          if (abandoned.load()) {
            sync.arrive_and_drop();
            return;
          }
          const size_t i = static_cast<size_t>(p) * threads + t;
          begin[i] = Clock::now();
          body(t);
          end[i] = Clock::now();
        }
      });
    }
  } catch (...) {
    // A thread could not start: release the started ones (they stop at their first barrier),
    // join them and pass the error on.
    abandoned.store(true);
    for (size_t missing = threads - pool.size(); missing > 0; --missing) sync.arrive_and_drop();
    for (std::thread& th : pool) th.join();
    throw;
  }
  for (std::thread& th : pool) th.join();
  std::vector<double> seconds;
  for (int p = 1; p <= passes; ++p) {
    const auto first = begin.begin() + static_cast<ptrdiff_t>(p) * threads;
    const auto last = end.begin() + static_cast<ptrdiff_t>(p) * threads;
    seconds.push_back(std::chrono::duration<double>(*std::max_element(last, last + threads) -
                                                    *std::min_element(first, first + threads))
                          .count());
  }
  return seconds;
}

// Anonymous memory of `bytes`, page-aligned and not yet touched (no page exists until written).
struct Mapping {
  void* p = MAP_FAILED;
  size_t bytes = 0;
  explicit Mapping(size_t n) : bytes(n) {
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
  }
  ~Mapping() { munmap(p, bytes); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

}  // namespace

std::string probe_isa() {
  return probe_table().isa;
}

BandwidthResult measure_read_bandwidth(const BandwidthOptions& o) {
  if (o.threads < 1) throw std::invalid_argument("bandwidth probe: threads must be >= 1");
  if (o.passes < 1) throw std::invalid_argument("bandwidth probe: passes must be >= 1");
  const detail::ProbeTable& k = probe_table();
  // Every share starts on a page boundary and holds whole blocks of the loop.
  const size_t page = 4096, block_bytes = k.read_block * sizeof(float);
  const size_t unit = std::max(page, block_bytes);
  const size_t share = o.bytes / static_cast<uint64_t>(o.threads) / unit * unit;
  if (share == 0)
    throw std::invalid_argument("bandwidth probe: " + std::to_string(o.bytes) +
                                " bytes leave no share of " + std::to_string(unit) +
                                " bytes for each of " + std::to_string(o.threads) + " threads");
  const size_t n = share / sizeof(float);  // floats per thread
  Mapping map(share * static_cast<size_t>(o.threads));
  float* base = static_cast<float*>(map.p);
  std::vector<double> sums(o.threads);
  BandwidthResult r;
  r.pass_seconds = timed_passes(
      o.threads, o.passes,
      [&](int t) { std::fill_n(base + n * t, n, 1.0f); },  // first touch by the reading thread
      [&](int t) { sums[t] = k.read_sum(base + n * t, n); });
  r.bytes_read = share * static_cast<uint64_t>(o.threads);
  r.threads = o.threads;
  r.isa = k.isa;
  for (double s : sums) r.checksum += s;
  const double bytes = static_cast<double>(r.bytes_read);
  r.bytes_per_s = bytes / median(r.pass_seconds);
  r.best_bytes_per_s = bytes / *std::min_element(r.pass_seconds.begin(), r.pass_seconds.end());
  return r;
}

namespace {

// Chains in registers on every thread: `chains(iterations, t)` runs thread t's, `products` the
// multiply-adds one step of all of them makes (2 FLOPs each).
template <typename Chains>
FmaPeakResult compute_peak(const FmaPeakOptions& o, const char* what, const char* isa, int products,
                           Chains chains) {
  if (o.threads < 1) throw std::invalid_argument(std::string(what) + ": threads must be >= 1");
  if (o.passes < 1) throw std::invalid_argument(std::string(what) + ": passes must be >= 1");
  if (o.iterations < 1)
    throw std::invalid_argument(std::string(what) + ": iterations must be >= 1");
  std::vector<float> sink(o.threads);
  FmaPeakResult r;
  r.pass_seconds = timed_passes(
      o.threads, o.passes, [](int) {}, [&](int t) { sink[t] = chains(o.iterations, t); });
  r.threads = o.threads;
  r.isa = isa;
  r.flops = 2.0 * products * static_cast<double>(o.iterations) * o.threads;
  r.flops_per_s = r.flops / median(r.pass_seconds);
  r.best_flops_per_s = r.flops / *std::min_element(r.pass_seconds.begin(), r.pass_seconds.end());
  volatile float keep = 0;
  for (float s : sink) keep = keep + s;
  (void)keep;
  return r;
}

}  // namespace

FmaPeakResult measure_fma_peak(const FmaPeakOptions& o) {
  const detail::ProbeTable& k = probe_table();
  return compute_peak(o, "FMA probe", k.isa, k.fma_lanes, [&](int64_t iterations, int t) {
    return k.fma_chains(iterations, 0.9999f + 1e-7f * static_cast<float>(t));
  });
}

bool has_bf16_dot_peak() {
  return kernels::cpu_has_avx512_bf16();
}

FmaPeakResult measure_bf16_dot_peak(const FmaPeakOptions& o) {
  if (!has_bf16_dot_peak())
    throw std::runtime_error(
        "BF16 dot-product probe: this CPU has no AVX-512 BF16 (vdpbf16ps); the fp32 FMA peak is "
        "the limit here");
  const detail::DotProbe& k = detail::kProbeBf16Dot;
  return compute_peak(o, "BF16 dot-product probe", k.isa, k.products,
                      [&](int64_t iterations, int t) {
                        return k.chains(iterations, 1.0f + 0.01f * static_cast<float>(t));
                      });
}

}  // namespace wick::bench
