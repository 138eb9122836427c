// Process-wide settings of the compute kernels.
//
// Threads: every matrix product and the WKV recurrence run on one persistent pool of worker
// threads (no thread is created per token). Its size defaults to the environment variable
// WICK_THREADS when set (>= 1), else one thread per available core.
#pragma once

namespace wick {

// Replaces the pool with one of `threads` threads in all (the caller included); <= 0 restores the
// default. Not thread-safe: call it while no pass is running (e.g. at start-up).
void set_threads(int threads);
// Threads of the current pool.
int threads();
// The instruction set the kernels dispatch to: "avx512", "avx2" or "scalar".
const char* kernel_isa();

}  // namespace wick
