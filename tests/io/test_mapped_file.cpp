// io::MappedFile::release_pages: the resident memory of a mapped range goes back to the system,
// its bytes stay readable and unchanged, and nothing outside the object's own mapping (borrowed
// bytes, a range past the end) is touched.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "test_util.h"

namespace wick::io {
namespace {

// Resident pages of this process (/proc/self/statm, second field), in bytes.
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t total = 0, resident = 0;
  f >> total >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(MappedFile, ReleasedPagesLeaveMemoryAndReadBackUnchanged) {
  const size_t n = size_t{48} << 20;  // 48 MiB
  const auto path = test::scratch_dir() / "pages.bin";
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
  }
  auto f = MappedFile::open(path.string());
  ASSERT_EQ(f->size(), n);
  // Touch every page, then release all but the first and last partial pages of an odd range.
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 512) sum += f->data()[i];
  ASSERT_GT(sum, 0u);
  const size_t before = resident_bytes();
  const size_t released = f->release_pages(f->data() + 100, n - 200);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(released, n - 2 * page);  // whole pages strictly inside the range
  const size_t after = resident_bytes();
  EXPECT_LT(after + (n / 2), before) << "resident " << before << " -> " << after;
  // The bytes read back as the file holds them.
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), n), 0);
  // A different range gives different bytes (the comparison above can fail).
  EXPECT_NE(std::memcmp(f->data(), bytes.data() + 1, 4096), 0);
}

TEST(MappedFile, ReleaseIgnoresBorrowedBytesAndRangesOutsideTheMapping) {
  std::vector<uint8_t> own(size_t{1} << 20, 7);
  auto borrowed = MappedFile::borrow(own.data(), own.size(), "memory");
  EXPECT_EQ(borrowed->release_pages(own.data(), own.size()), 0u);
  EXPECT_EQ(own[12345], 7);  // heap memory untouched

  const auto path = test::scratch_dir() / "small.bin";
  {
    std::ofstream out(path, std::ios::binary);
    const std::vector<char> zeros(65536, 1);
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  auto f = MappedFile::open(path.string());
  EXPECT_EQ(f->release_pages(f->data() + 4096, f->size()), 0u);  // runs past the end
  EXPECT_EQ(f->release_pages(own.data(), 8192), 0u);              // another object's memory
  EXPECT_EQ(f->release_pages(f->data() + 10, 100), 0u);           // no whole page inside
  EXPECT_EQ(f->data()[f->size() - 1], 1);
}

}  // namespace
}  // namespace wick::io
