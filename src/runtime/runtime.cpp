#include "wick/runtime.h"

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "runtime/runtime_impl.h"
#include "wick/errors.h"

namespace wick {

int default_thread_count() {
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

Runtime::Runtime(int threads)
    : impl_(std::make_unique<Impl>(threads >= 1 ? threads : default_thread_count())) {
  kernels::active_isa();  // a WICK_ISA that cannot be honoured fails here, in the caller's thread
}

Runtime::~Runtime() = default;

int Runtime::threads() const {
  return impl_->threads;
}

const char* kernel_isa() {
  return kernels::isa_name(kernels::active_isa()).data();
}

std::vector<std::pair<std::string, std::string>> kernel_choices() {
  return kernels::kernel_table().describe();
}

RuntimeLease::RuntimeLease(const Runtime& runtime) : impl_(runtime.impl()) {
  if (impl_.owner.load() == std::this_thread::get_id())
    throw InputError(
        "a pass was started from inside another pass on the same Runtime (for "
        "example from an ActivationTrace callback); run the inner one on a Model "
        "with a Runtime of its own (Model::with_runtime)");
  lock_ = std::unique_lock<std::mutex>(impl_.lease_mutex);
  impl_.owner.store(std::this_thread::get_id());
}

RuntimeLease::~RuntimeLease() {
  impl_.owner.store(std::thread::id());
}

kernels::ThreadPool& RuntimeLease::pool() {
  if (!impl_.pool) impl_.pool = std::make_unique<kernels::ThreadPool>(impl_.threads);
  return *impl_.pool;
}

}  // namespace wick
