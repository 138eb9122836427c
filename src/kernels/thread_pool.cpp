#include "kernels/thread_pool.h"

#include <immintrin.h>

namespace wick::kernels {
namespace {

// How long an idle worker spins before sleeping: about 100 us, a little more than the gaps
// between the matrix products of one decode step.
constexpr int kSpinRounds = 4000;
constexpr size_t kAlign = 64;

}  // namespace

void* Arena::bytes(size_t n, int slot) {
  Buffer& b = buffers_[slot];
  // Grow geometrically so a slowly rising size does not reallocate every call.
  if (n > b.capacity) grow(std::max(n, b.capacity + b.capacity / 2), slot);
  return b.aligned;
}

void Arena::grow(size_t capacity, int slot) {
  Buffer& b = buffers_[slot];
  b.raw.reset(new std::byte[capacity + kAlign]);  // uninitialised: contents are unspecified
  const uintptr_t p = reinterpret_cast<uintptr_t>(b.raw.get());
  b.aligned = b.raw.get() + ((kAlign - p % kAlign) % kAlign);
  b.capacity = capacity;
}

ThreadPool::ThreadPool(int threads) : arenas_(static_cast<size_t>(threads < 1 ? 1 : threads)) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
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

void ThreadPool::drain(uint32_t gen, Arena& arena) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(t >> 32) == gen) {
    const int64_t block = static_cast<int64_t>(t & 0xffffffffu);
    // The bound must be this generation's: a worker holding a stale ticket of the previous job
    // could otherwise compare against the next job's block count and claim a block that does
    // not exist, running it with the next job's function half-published.
    const uint64_t bound = bound_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(bound >> 32) != gen ||
        block >= static_cast<int64_t>(bound & 0xffffffffu))
      break;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    // The claim pins the generation: the caller cannot publish another job before this block is
    // counted as done, so fn_ / ctx_ still belong to `gen`.
    fn_(ctx_, block, arena);
    done_.fetch_add(1, std::memory_order_release);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  Arena& arena = arenas_[static_cast<size_t>(index)];
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
    drain(gen, arena);
  }
}

void ThreadPool::run_impl(int64_t n_blocks, BlockFn fn, void* ctx) {
  if (n_blocks <= 0) return;
  if (workers_.empty() || n_blocks == 1) {
    if (!busy_.exchange(true, std::memory_order_acquire)) {
      for (int64_t b = 0; b < n_blocks; ++b) fn(ctx, b, arenas_[0]);
      busy_.store(false, std::memory_order_release);
      return;
    }
  }
  // Nested (inside a block) or a second caller: compute this job here with scratch of its own.
  if (busy_.exchange(true, std::memory_order_acquire)) {
    Arena local;
    for (int64_t b = 0; b < n_blocks; ++b) fn(ctx, b, local);
    return;
  }
  // Every thread's arena as large as the largest: which thread runs which block varies from run
  // to run (with the machine's load), so a size one thread has needed is reserved for all, and a
  // steady state allocates nothing whoever runs the blocks. The workers are idle here.
  for (int slot = 0; slot < Arena::kBuffers; ++slot) {
    size_t most = 0;
    for (const Arena& a : arenas_) most = std::max(most, a.capacity(slot));
    for (Arena& a : arenas_)
      if (a.capacity(slot) < most) a.reserve(most, slot);
  }
  const uint32_t gen = generation_.load() + 1;
  fn_ = fn;
  ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  bound_.store((static_cast<uint64_t>(gen) << 32) | static_cast<uint64_t>(n_blocks),
               std::memory_order_release);
  ticket_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen);  // seq_cst: pairs with the sleepers_ check below
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  drain(gen, arenas_[0]);
  while (done_.load(std::memory_order_acquire) < n_blocks) _mm_pause();
  busy_.store(false, std::memory_order_release);
}

}  // namespace wick::kernels
