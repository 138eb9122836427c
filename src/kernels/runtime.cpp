#include "wick/runtime.h"

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

namespace wick {

void set_threads(int n) { kernels::ThreadPool::set_global_threads(n); }
int threads() { return kernels::ThreadPool::global().threads(); }
const char* kernel_isa() { return kernels::isa_name(kernels::active_isa()).data(); }

}  // namespace wick
