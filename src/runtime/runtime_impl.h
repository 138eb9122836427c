// Private part of wick::Runtime: the kernel thread pool (created on first use), the activation
// workspace of the passes, and the lease that gives one pass at a time the use of both.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/thread_pool.h"
#include "wick/runtime.h"

namespace wick {

// Reusable per-pass state a pass keeps in its Runtime between calls (the forward pass's activation
// buffers). Owned by the Runtime, used under a lease.
struct PassWorkspace {
  virtual ~PassWorkspace() = default;
};

struct Runtime::Impl {
  explicit Impl(int threads) : threads(threads) {}
  const int threads;
  std::mutex lease_mutex;
  std::atomic<std::thread::id> owner{};       // the thread holding the lease (nested-pass check)
  std::unique_ptr<kernels::ThreadPool> pool;  // under the lease; created on first use
  std::unique_ptr<PassWorkspace> workspace;   // under the lease
};

// Exclusive use of a Runtime's pool and workspace for one pass (blocks while another pass holds
// it). Throws InputError when the calling thread already holds it (a pass inside a pass).
class RuntimeLease {
 public:
  explicit RuntimeLease(const Runtime& runtime);
  ~RuntimeLease();
  RuntimeLease(const RuntimeLease&) = delete;
  RuntimeLease& operator=(const RuntimeLease&) = delete;

  kernels::ThreadPool& pool();
  // True when the calling thread holds a lease of `runtime` (it is inside a pass on it).
  static bool held_by_this_thread(const Runtime& runtime) {
    return runtime.impl().owner.load() == std::this_thread::get_id();
  }
  // The workspace kept in the Runtime, as W (created, or replaced when it is another type).
  template <class W>
  W& workspace() {
    if (!dynamic_cast<W*>(impl_.workspace.get())) impl_.workspace = std::make_unique<W>();
    return static_cast<W&>(*impl_.workspace);
  }

 private:
  Runtime::Impl& impl_;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace wick
