// The execution context of wick's passes: a Runtime owns the worker threads of the kernels and the
// scratch memory of a pass (per-thread kernel arenas and the pass's activation buffers, grown to
// the largest pass seen and then reused, so a steady-state decode step allocates nothing).
//
// Every Model runs on one Runtime (Model::runtime()): a loaded Model gets a Runtime of its own with
// the default thread count, copies of a Model share it, and Model::with_runtime() moves a Model
// (sharing its weights) onto another one. The library has no process-wide pool or setting: two
// Models with two Runtimes run side by side without sharing any mutable state.
//
// Threads: `threads` in all, the calling thread included; the workers start on the first pass
// that needs them and stop with the Runtime. The library default is one thread per available
// core; the CLI reads WICK_THREADS / --threads and builds its Runtime from them.
//
// Thread-safety: a Runtime runs one pass at a time. Passes started from several threads on Models
// that share a Runtime take turns (each pass still uses every thread of the Runtime); give each
// concurrent user its own Runtime to run them in parallel. A pass started from inside another pass
// on the same Runtime (for example from an ActivationTrace callback) throws InputError.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wick {

class Runtime {
 public:
  // `threads` in all (<= 0: default_thread_count()). Throws InputError when the environment
  // variable WICK_ISA names an instruction set this CPU lacks or an unknown one.
  explicit Runtime(int threads = 0);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int threads() const;

  struct Impl;
  // Internal (libwick): the pool, scratch and lease (runtime/runtime_impl.h).
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// One thread per available core (std::thread::hardware_concurrency, at least 1).
int default_thread_count();

// The instruction set the kernels dispatch to: "avx512", "avx2" or "scalar" (read-only, chosen
// once from the CPU and WICK_ISA). Throws InputError for a WICK_ISA that cannot be honoured.
const char* kernel_isa();

// What each kernel family runs at that level, in a fixed order: ("dot", ...) the dense dot /
// GEMV / GEMM, ("int8", ...) the --quantize int8 products, ("packed", ...) the .rwkvq kernels,
// ("wkv", ...) the WKV recurrence at head size 64, ("attention", ...) RWKV-X attention,
// ("sampler", ...) the sampler's passes over the vocabulary. Variants: "scalar", "avx2",
// "avx512", "avx512-vnni" - a family may run a lower level than kernel_isa() where that build is
// the faster or the only one. Throws like kernel_isa().
std::vector<std::pair<std::string, std::string>> kernel_choices();

}  // namespace wick
