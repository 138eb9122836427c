// base/huge_buffer.h: the buffer starts on a 2 MiB boundary, is zeroed and writable over its whole
// length, each buffer is its own memory, and exactly its whole huge pages are mapped while it
// lives and given back when it goes.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "base/huge_buffer.h"

namespace wick::base {
namespace {

TEST(HugeBuffer, IsAlignedZeroedWritableAndItsOwn) {
  for (size_t bytes : {size_t{1}, size_t{4096}, (size_t{2} << 20) + 3, size_t{5} << 20}) {
    const std::shared_ptr<uint8_t> a = huge_page_buffer(bytes), b = huge_page_buffer(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.get()) % (size_t{2} << 20), 0u) << bytes;
    for (size_t i = 0; i < bytes; i += 4093) EXPECT_EQ(a.get()[i], 0) << i;
    EXPECT_EQ(a.get()[bytes - 1], 0);
    a.get()[0] = 7;
    a.get()[bytes - 1] = 9;
    EXPECT_EQ(b.get()[0], 0);
    EXPECT_EQ(b.get()[bytes - 1], 0);
    EXPECT_EQ(a.get()[bytes - 1], 9);
  }
}

// mincore() fails with ENOMEM when a range holds an unmapped page: the buffer's whole 2 MiB pages
// are mapped, the spare page mapped to align it is not (the page after the buffer), and after the
// last owner goes none of the buffer's pages is (a deleter unmapping only `bytes` leaves the rest).
TEST(HugeBuffer, MapsItsWholeHugePagesAndGivesThemAllBack) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t kHuge = size_t{2} << 20;
  for (size_t bytes : {size_t{1}, (size_t{2} << 20) + 3, size_t{5} << 20}) {
    const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
    std::vector<unsigned char> resident(len / page);
    std::shared_ptr<uint8_t> a = huge_page_buffer(bytes);
    uint8_t* start = a.get();
    EXPECT_EQ(::mincore(start, len, resident.data()), 0) << bytes;
    errno = 0;
    EXPECT_EQ(::mincore(start + len, page, resident.data()), -1) << bytes;
    EXPECT_EQ(errno, ENOMEM) << "the page after the buffer is still mapped (" << bytes << ")";
    a.reset();
    errno = 0;
    EXPECT_EQ(::mincore(start, len, resident.data()), -1) << bytes;
    EXPECT_EQ(errno, ENOMEM) << bytes;
    for (size_t off = 0; off < len; off += kHuge / 2) {
      errno = 0;
      EXPECT_EQ(::mincore(start + off, page, resident.data()), -1) << bytes << " at " << off;
    }
  }
}

}  // namespace
}  // namespace wick::base
