// base/huge_buffer.h: the buffer starts on a 2 MiB boundary, is zeroed and writable over its whole
// length, and each buffer is its own memory.
#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace wick::base
