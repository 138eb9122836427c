// The kernels' thread pool of the kernel benchmarks: WICK_THREADS threads when set, else one per
// core (benchmarks are programs, not the library: they may read the environment).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "kernels/thread_pool.h"

inline wick::kernels::ThreadPool& bench_pool() {
  static wick::kernels::ThreadPool pool([] {
    const char* env = std::getenv("WICK_THREADS");
    const int n = env ? std::atoi(env) : 0;
    return n >= 1 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return pool;
}
