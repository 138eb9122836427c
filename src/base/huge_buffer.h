// Anonymous memory advised for transparent huge pages: for large buffers that a decode step
// streams (the weights packed at load, model/panel_packing.h), where 4 KiB pages would cost a TLB
// miss every few kilobytes. Advice only: without transparent huge pages, or with them set to
// "never", the buffer is ordinary memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace wick::base {

// `bytes` bytes (>= 1) of zeroed memory, its start aligned to 2 MiB, advised MADV_HUGEPAGE;
// released (munmap) when the last owner goes. The pages are committed as they are first written.
// Throws std::bad_alloc when the system refuses the mapping. Thread-safety: the usual for
// shared_ptr.
std::shared_ptr<uint8_t> huge_page_buffer(size_t bytes);

}  // namespace wick::base
