// io::MappedFile: its mapping is advised for huge pages; release_pages gives the resident memory
// of a mapped range back to the system, its bytes stay readable and unchanged, and nothing outside
// the object's own mapping (borrowed bytes, a range past the end) is touched.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// The VmFlags line of the mapping of this process that starts at `p` (/proc/self/smaps), or ""
// when no mapping starts there. VmFlags is the last line of each mapping's block, so the first
// one after the mapping's header line ("start-end perms ...") is its own.
std::string vm_flags_of_mapping_at(const void* p) {
  char start[32];
  std::snprintf(start, sizeof start, "%lx-",
                static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_it = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(start, 0) == 0) in_it = true;
    if (in_it && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// Whether the flags hold `flag` as a whole word ("hg": advised MADV_HUGEPAGE).
bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w)
    if (w == flag) return true;
  return false;
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
  {
    const size_t n = size_t{4} << 20;
    void* control = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(control, MAP_FAILED);
    const bool recorded = ::madvise(control, n, MADV_HUGEPAGE) == 0 &&
                          has_flag(vm_flags_of_mapping_at(control), "hg");
    ::munmap(control, n);
    if (!recorded)
      GTEST_SKIP() << "this kernel does not record MADV_HUGEPAGE (no \"hg\" in the VmFlags of "
                      "/proc/self/smaps for an advised mapping): there is nothing to check";
  }
  auto f = MappedFile::open(path.string());
  const std::string flags = vm_flags_of_mapping_at(f->data());
  ASSERT_NE(flags, "") << "no mapping starts at the file's bytes in /proc/self/smaps";
  EXPECT_TRUE(has_flag(flags, "hg")) << flags;
  EXPECT_EQ(f->data()[f->size() - 1], 3);

  // The check can fail: a plain mapping of the same file, without the advice, lacks the flag.
  std::FILE* c = std::fopen(path.string().c_str(), "rb");
  ASSERT_NE(c, nullptr);
  void* plain = ::mmap(nullptr, f->size(), PROT_READ, MAP_PRIVATE, ::fileno(c), 0);
  std::fclose(c);
  ASSERT_NE(plain, MAP_FAILED);
  const std::string plain_flags = vm_flags_of_mapping_at(plain);
  ::munmap(plain, f->size());
  ASSERT_NE(plain_flags, "");
  EXPECT_FALSE(has_flag(plain_flags, "hg")) << plain_flags;
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
