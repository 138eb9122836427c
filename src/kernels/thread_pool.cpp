#include "kernels/thread_pool.h"

#include <immintrin.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace wick::kernels {
namespace {

// How long an idle worker spins before sleeping: about 100 us, a little more than the gaps
// between the matrix products of one decode step.
constexpr int kSpinRounds = 4000;

thread_local bool t_inside_job = false;

int default_threads() {
  if (const char* env = std::getenv("WICK_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::drain(uint32_t gen) {
  t_inside_job = true;
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(t >> 32) == gen) {
    const int64_t block = static_cast<int64_t>(t & 0xffffffffu);
    if (block >= n_blocks_.load(std::memory_order_relaxed)) break;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    // The claim pins the generation: the caller cannot publish another job before this block is
    // counted as done, so fn_ / ctx_ still belong to `gen`.
    fn_(ctx_, block);
    done_.fetch_add(1, std::memory_order_release);
    t = ticket_.load(std::memory_order_acquire);
  }
  t_inside_job = false;
}

void ThreadPool::worker_loop() {
  uint32_t seen = generation_.load();
  while (true) {
    // A worker that starts only after the pool began shutting down must still leave.
    if (stop_.load()) return;
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinRounds; ++i) {
      _mm_pause();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      // Sleep. The publisher stores the generation before it reads sleepers_ (both seq_cst):
      // either it sees this sleeper and notifies under the mutex, or the predicate sees the new
      // generation.
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
      sleepers_.fetch_sub(1);
      continue;
    }
    seen = gen;
    if (stop_.load()) return;
    drain(gen);
  }
}

void ThreadPool::run_impl(int64_t n_blocks, BlockFn fn, void* ctx) {
  if (n_blocks <= 0) return;
  auto inline_run = [&] {
    for (int64_t b = 0; b < n_blocks; ++b) fn(ctx, b);
  };
  if (workers_.empty() || t_inside_job || n_blocks == 1) return inline_run();
  // Another thread's job has the workers: compute this one here rather than wait.
  std::unique_lock<std::mutex> owner(run_mutex_, std::try_to_lock);
  if (!owner.owns_lock()) return inline_run();
  const uint32_t gen = generation_.load() + 1;
  n_blocks_.store(n_blocks, std::memory_order_relaxed);
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  ticket_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen);  // seq_cst: pairs with the sleepers_ check below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  drain(gen);
  while (done_.load(std::memory_order_acquire) < n_blocks) _mm_pause();
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_threads());
  return *g_pool;
}

void ThreadPool::set_global_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool = std::make_unique<ThreadPool>(threads >= 1 ? threads : default_threads());
}

}  // namespace wick::kernels
