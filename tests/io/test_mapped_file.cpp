// io::MappedFile: its mapping is advised for huge pages; release_pages gives the resident memory
// of a mapped range back to the system, advise_sparse marks a range for reads a row at a time,
// the bytes stay readable and unchanged, and nothing outside the object's own mapping (borrowed
// bytes, a range past the end) is touched.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "bench/memory.h"
#include "smaps_util.h"
#include "test_util.h"

namespace wick::io {
namespace {

using test::has_flag;
using test::vm_flags_of_mapping_holding;

// n bytes of a fixed pseudo-random pattern (each differs from its neighbour), written to `path`
// (closed on return) and returned.
std::vector<uint8_t> write_patterned_file(const std::filesystem::path& path, size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
  out.close();
  EXPECT_TRUE(out.good()) << "could not write " << path;
  return bytes;
}

TEST(MappedFile, AsksForHugePagesOnItsMapping) {
  const auto path = test::scratch_dir() / "huge.bin";
  {
    std::ofstream out(path, std::ios::binary);
    const std::vector<char> bytes(size_t{4} << 20, 3);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // A control: where the kernel does not record the advice (no transparent huge pages, a
  // sandbox that accepts madvise as a no-op), there is nothing to check.
  if (!test::kernel_records_advice(MADV_HUGEPAGE, "hg"))
    GTEST_SKIP() << "this kernel does not record MADV_HUGEPAGE (no \"hg\" in the VmFlags of "
                    "/proc/self/smaps for an advised mapping): there is nothing to check";
  auto f = MappedFile::open(path.string());
  const std::string flags = vm_flags_of_mapping_holding(f->data());
  ASSERT_NE(flags, "") << "no mapping holds the file's bytes in /proc/self/smaps";
  EXPECT_TRUE(has_flag(flags, "hg")) << flags;
  EXPECT_EQ(f->data()[f->size() - 1], 3);

  // The check can fail: a plain mapping of the same file, without the advice, lacks the flag.
  std::FILE* c = std::fopen(path.string().c_str(), "rb");
  ASSERT_NE(c, nullptr);
  void* plain = ::mmap(nullptr, f->size(), PROT_READ, MAP_PRIVATE, ::fileno(c), 0);
  std::fclose(c);
  ASSERT_NE(plain, MAP_FAILED);
  const std::string plain_flags = vm_flags_of_mapping_holding(plain);
  ::munmap(plain, f->size());
  ASSERT_NE(plain_flags, "");
  EXPECT_FALSE(has_flag(plain_flags, "hg")) << plain_flags;
}

TEST(MappedFile, ReleasedPagesLeaveMemoryAndReadBackUnchanged) {
  const size_t n = size_t{48} << 20;  // 48 MiB
  const auto path = test::scratch_dir() / "pages.bin";
  const std::vector<uint8_t> bytes = write_patterned_file(path, n);
  auto f = MappedFile::open(path.string());
  ASSERT_EQ(f->size(), n);
  // Touch every page, then release all but the first and last partial pages of an odd range.
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 512) sum += f->data()[i];
  ASSERT_GT(sum, 0u);
  const uint64_t before = bench::resident_bytes();
  const size_t released = f->release_pages(f->data() + 100, n - 200);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(released, n - 2 * page);  // whole pages strictly inside the range
  const uint64_t after = bench::resident_bytes();
  EXPECT_LT(after + (n / 2), before) << "resident " << before << " -> " << after;
  // The bytes read back as the file holds them.
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), n), 0);
  // A different range gives different bytes (the comparison above can fail).
  EXPECT_NE(std::memcmp(f->data(), bytes.data() + 1, 4096), 0);
}

TEST(MappedFile, SparseAdviceMarksTheWholePagesOfItsRangeOnly) {
  if (!test::kernel_records_advice(MADV_RANDOM, "rr"))
    GTEST_SKIP() << "this kernel does not record MADV_RANDOM (no \"rr\" in the VmFlags of "
                    "/proc/self/smaps for an advised mapping): there is nothing to check";
  const size_t n = size_t{8} << 20, mib = size_t{1} << 20;
  const auto path = test::scratch_dir() / "sparse.bin";
  const std::vector<uint8_t> bytes = write_patterned_file(path, n);
  auto f = MappedFile::open(path.string());
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // [2 MiB + 100, 6 MiB + 100): the whole pages inside are [2 MiB + page, 6 MiB).
  EXPECT_EQ(f->advise_sparse(f->data() + 2 * mib + 100, 4 * mib), 4 * mib - page);
  const std::string inside = vm_flags_of_mapping_holding(f->data() + 3 * mib);
  EXPECT_TRUE(has_flag(inside, "rr")) << inside;
  if (test::kernel_records_advice(MADV_NOHUGEPAGE, "nh")) {  // a kernel with huge pages
    EXPECT_TRUE(has_flag(inside, "nh")) << inside;
    EXPECT_FALSE(has_flag(inside, "hg")) << inside;
  }
  // Outside the range (the partial pages at its ends included) the mapping is as opened.
  for (const size_t at : {size_t{0}, 2 * mib + 100, 6 * mib + 50, 7 * mib}) {
    const std::string outside = vm_flags_of_mapping_holding(f->data() + at);
    EXPECT_FALSE(has_flag(outside, "rr")) << at << ": " << outside;
    EXPECT_FALSE(has_flag(outside, "nh")) << at << ": " << outside;
  }
  // The advice changes no byte read.
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), n), 0);
  EXPECT_NE(std::memcmp(f->data() + 3 * mib, bytes.data() + 3 * mib + 1, 4096), 0);
}

TEST(MappedFile, HoldsExactlyTheRangesInsideItsBytes) {
  std::vector<uint8_t> own(size_t{1} << 16, 7);
  const auto borrowed = MappedFile::borrow(own.data() + 16, 4096, "memory");
  EXPECT_TRUE(borrowed->holds(own.data() + 16, 4096));
  EXPECT_TRUE(borrowed->holds(own.data() + 100, 4096 - 84));  // ends at the last byte
  EXPECT_FALSE(borrowed->holds(own.data() + 100, 4096 - 83));  // one byte past it
  EXPECT_FALSE(borrowed->holds(own.data() + 15, 1));           // one byte before it
  EXPECT_FALSE(borrowed->holds(own.data() + 16, 4097));
  EXPECT_FALSE(borrowed->holds(own.data() + 5000, 1));
  EXPECT_FALSE(borrowed->holds(own.data() + 16, SIZE_MAX));  // no wrap-around
  const auto path = test::scratch_dir() / "holds.bin";
  write_patterned_file(path, 8192);
  const auto f = MappedFile::open(path.string());
  EXPECT_TRUE(f->holds(f->data(), f->size()));
  EXPECT_TRUE(f->holds(f->data() + 8191, 1));
  EXPECT_FALSE(f->holds(f->data() + 8191, 2));
  EXPECT_TRUE(f->holds(f->data() + f->size(), 0));  // an empty range at the end
  EXPECT_FALSE(f->holds(f->data() + f->size() + 1, 0));
  EXPECT_FALSE(f->holds(own.data() + 16, 1));  // another object's bytes
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
  // The sparse-read advice checks its range the same way.
  EXPECT_EQ(borrowed->advise_sparse(own.data(), own.size()), 0u);
  EXPECT_EQ(f->advise_sparse(f->data() + 4096, f->size()), 0u);
  EXPECT_EQ(f->advise_sparse(own.data(), 8192), 0u);
  EXPECT_EQ(f->advise_sparse(f->data() + 10, 100), 0u);
  EXPECT_EQ(f->advise_sparse(f->data(), f->size()), f->size());  // all of it: accepted
}

}  // namespace
}  // namespace wick::io
