// A persistent pool of worker threads for the kernels: no thread is created per token, and waking
// the pool costs a few atomic operations. Work is split into blocks that the threads (the caller
// included) claim one at a time from a shared counter, so a worker that the operating system has
// descheduled (this machine is shared) holds the others up by at most the block it is on - the
// caller simply takes the remaining blocks itself. Which thread computes a block never changes
// its result: every kernel writes each output from one thread with a fixed summation order, so
// results are bit-identical for any thread count.
//
// Each thread of the pool has an Arena (growable scratch memory), handed to the blocks it runs,
// so kernels need no thread-local or global buffers and a steady-state pass allocates nothing.
//
// Idle workers spin briefly (decode issues hundreds of small jobs per token) and then sleep on a
// condition variable, so an idle process uses no CPU.
//
// Thread-safety: one caller at a time (a Runtime lease, wick/runtime.h, serialises the passes that
// share a pool); the caller's arena (caller_arena(), and the blocks parallel_for runs inline:
// n_blocks <= 1, or work below kParallelMinWork) belongs to that caller. Kernels never start a
// run() from inside a block. Should one find the pool busy anyway, its blocks run inline with a
// temporary arena (same results, but it allocates) - a fallback, not a way to share the pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace wick::kernels {

// Scratch memory of one thread: numbered buffers that grow to the largest size asked for and are
// never shrunk. Contents are unspecified on each get(). Blocks use slots kBlock0 / kBlock1; a
// pool's caller keeps what it prepares for its blocks in kCaller0 / kCaller1 of caller_arena()
// (the caller's thread runs blocks too, with the same arena).
class Arena {
 public:
  static constexpr int kBuffers = 4;
  static constexpr int kBlock0 = 0, kBlock1 = 1, kCaller0 = 2, kCaller1 = 3;
  // n elements of T (trivially copyable), 64-byte aligned, in buffer `slot` (0..kBuffers-1).
  template <class T>
  T* get(size_t n, int slot = 0) {
    static_assert(std::is_trivially_copyable_v<T>);
    return static_cast<T*>(bytes(n * sizeof(T), slot));
  }
  // Bytes buffer `slot` holds without growing.
  size_t capacity(int slot) const { return buffers_[slot].capacity; }
  // Grows buffer `slot` to exactly n bytes when it holds fewer (contents not kept): the pool
  // levels its arenas with it, so it must not overshoot (a geometric step here would make two
  // arenas outgrow each other in turn at every job).
  void reserve(size_t n, int slot) {
    if (n > buffers_[slot].capacity) grow(n, slot);
  }

 private:
  void* bytes(size_t n, int slot);
  void grow(size_t capacity, int slot);
  struct Buffer {
    std::unique_ptr<std::byte[]> raw;
    std::byte* aligned = nullptr;
    size_t capacity = 0;
  };
  Buffer buffers_[kBuffers];
};

class ThreadPool {
 public:
  // `threads` = total threads including the caller (>= 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(block, arena) - or fn(block) - once for every block in [0, n_blocks), spread over the
  // threads; `arena` belongs to the thread running the block. Returns when all have finished.
  // Exceptions must not escape fn.
  template <typename Fn>
  void run(int64_t n_blocks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_impl(
        n_blocks,
        [](void* ctx, int64_t b, Arena& a) {
          if constexpr (std::is_invocable_v<F&, int64_t, Arena&>)
            (*static_cast<F*>(ctx))(b, a);
          else
            (*static_cast<F*>(ctx))(b);
        },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The calling thread's arena (scratch the caller uses before or after a run()). Only for the
  // pool's current caller.
  Arena& caller_arena() { return arenas_[0]; }

 private:
  using BlockFn = void (*)(void* ctx, int64_t block, Arena& arena);
  void run_impl(int64_t n_blocks, BlockFn fn, void* ctx);
  void worker_loop(int index);
  // Claims and runs blocks of generation `gen` until none is left, with `arena`.
  void drain(uint32_t gen, Arena& arena);

  std::vector<Arena> arenas_;  // [0] the caller, [i] worker i
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};  // a caller owns the workers
  // (generation << 32) | next block: a claim succeeds only for the generation it was read in.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> generation_{0};  // bumped to publish a job
  std::mutex sleep_mutex_;               // idle workers sleep on wake_ after spinning
  std::condition_variable wake_;
  std::atomic<int64_t> done_{0};  // blocks finished in the current generation
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // (generation << 32) | block count of the job published for that generation.
  std::atomic<uint64_t> bound_{0};
  BlockFn fn_ = nullptr;
  void* ctx_ = nullptr;
};

namespace pool_detail {
// fn(b[, arena]) for every block in order, on the caller with the caller's arena.
template <typename Fn>
void run_inline(ThreadPool& pool, int64_t n_blocks, Fn& fn) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    if constexpr (std::is_invocable_v<Fn&, int64_t, Arena&>)
      fn(b, pool.caller_arena());
    else
      fn(b);
  }
}
}  // namespace pool_detail

// pool.run(n_blocks, fn), or inline on the caller (with the caller's arena) when n_blocks <= 1.
template <typename Fn>
void parallel_for(ThreadPool& pool, int64_t n_blocks, Fn&& fn) {
  if (n_blocks <= 1) return pool_detail::run_inline(pool, n_blocks, fn);
  pool.run(n_blocks, std::forward<Fn>(fn));
}

// Below this much work (multiply-adds, or elements written) a kernel runs all of its blocks on the
// calling thread: waking a worker costs about 1-2 us.
constexpr int64_t kParallelMinWork = int64_t{1} << 15;

// parallel_for(pool, n_blocks, fn), or every block inline on the caller when `work` is below
// kParallelMinWork.
template <typename Fn>
void parallel_for(ThreadPool& pool, int64_t n_blocks, int64_t work, Fn&& fn) {
  if (work < kParallelMinWork) return pool_detail::run_inline(pool, n_blocks, fn);
  parallel_for(pool, n_blocks, std::forward<Fn>(fn));
}

}  // namespace wick::kernels
