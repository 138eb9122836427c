#include "base/huge_buffer.h"

#include <sys/mman.h>

#include <new>

namespace wick::base {

std::shared_ptr<uint8_t> huge_page_buffer(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes == 0) bytes = 1;
  // Mapped with a huge page to spare, so a 2 MiB-aligned start exists inside; the rest is given
  // back at once.
  const size_t span = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (lo + kHuge - 1) / kHuge * kHuge;
  const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  if (start > lo) ::munmap(p, start - lo);
  const uintptr_t end = lo + span;
  if (end > start + len) ::munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  auto* data = reinterpret_cast<uint8_t*>(start);
  (void)::madvise(data, len, MADV_HUGEPAGE);
  return std::shared_ptr<uint8_t>(data, [len](uint8_t* q) { ::munmap(q, len); });
}

}  // namespace wick::base
