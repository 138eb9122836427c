// A persistent pool of worker threads for the kernels: no thread is created per token, and waking
// the pool costs a few atomic operations. Work is split into blocks that the threads (the caller
// included) claim one at a time from a shared counter, so a worker that the operating system has
// descheduled (this machine is shared) holds the others up by at most the block it is on - the
// caller simply takes the remaining blocks itself. Which thread computes a block never changes
// its result: every kernel writes each output from one thread with a fixed summation order, so
// results are bit-identical for any thread count.
//
// Idle workers spin briefly (decode issues hundreds of small jobs per token) and then sleep on a
// condition variable, so an idle process uses no CPU.
//
// Thread-safety: run() may be called from any number of threads. One caller at a time has the
// workers; a caller that finds them busy runs its blocks itself (same results, see above), so
// concurrent forward() calls on one Model are correct. Nested run() calls from inside a job
// execute inline on the calling thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace wick::kernels {

class ThreadPool {
 public:
  // `threads` = total threads including the caller (>= 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(block) once for every block in [0, n_blocks), spread over the threads; returns when
  // all have finished. Exceptions must not escape fn.
  template <typename Fn>
  void run(int64_t n_blocks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_impl(n_blocks, [](void* ctx, int64_t b) { (*static_cast<F*>(ctx))(b); },
             const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The pool the kernels use: WICK_THREADS threads if set (>= 1), else one per available core.
  static ThreadPool& global();
  // Replaces the global pool with one of `threads` threads (<= 0: the default above). Must not be
  // called while any kernel runs.
  static void set_global_threads(int threads);

 private:
  using BlockFn = void (*)(void* ctx, int64_t block);
  void run_impl(int64_t n_blocks, BlockFn fn, void* ctx);
  void worker_loop();
  // Claims and runs blocks of generation `gen` until none is left.
  void drain(uint32_t gen);

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // held by the caller that owns the workers for one job
  // (generation << 32) | next block: a claim succeeds only for the generation it was read in.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> generation_{0};  // bumped to publish a job
  std::mutex sleep_mutex_;               // idle workers sleep on wake_ after spinning
  std::condition_variable wake_;
  std::atomic<int64_t> done_{0};         // blocks finished in the current generation
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> n_blocks_{0};
  BlockFn fn_ = nullptr;
  void* ctx_ = nullptr;
};

// ThreadPool::global().run(n_blocks, fn), or inline when n_blocks <= 1.
template <typename Fn>
void parallel_for(int64_t n_blocks, Fn&& fn) {
  if (n_blocks <= 1) {
    for (int64_t b = 0; b < n_blocks; ++b) fn(b);
    return;
  }
  ThreadPool::global().run(n_blocks, std::forward<Fn>(fn));
}

}  // namespace wick::kernels
