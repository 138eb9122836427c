// Reading this process's mappings from /proc/self/smaps in tests: the VmFlags of the mapping that
// holds an address, every mapping of a file with its size and flags, and whether an madvise()
// advice shows in the VmFlags at all on this kernel (a control for tests that look for it).
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace wick::test {

// One mapping of /proc/self/smaps: [lo, hi), the file offset at lo, the path it maps ("" for
// anonymous memory), its VmFlags line and its resident bytes (the Rss line).
struct SmapsMapping {
  uintptr_t lo = 0, hi = 0;
  uint64_t offset = 0;
  std::string path;
  std::string flags;
  uint64_t rss_bytes = 0;
};

// Every mapping of this process, in address order. A block's header is "lo-hi perms offset dev
// inode [path]"; VmFlags is the last line of each block.
inline std::vector<SmapsMapping> smaps_mappings() {
  std::vector<SmapsMapping> out;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0, offset = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &offset, &used) == 3 &&
        used > 0) {
      out.push_back({lo, hi, offset, line.substr(static_cast<size_t>(used)), "", 0});
    } else if (unsigned long kib = 0;
               line.rfind("Rss:", 0) == 0 && !out.empty() &&
               std::sscanf(line.c_str(), "Rss: %lu kB", &kib) == 1) {
      out.back().rss_bytes = uint64_t{kib} * 1024;
    } else if (line.rfind("VmFlags:", 0) == 0 && !out.empty()) {
      out.back().flags = line;
    }
  }
  return out;
}

// The VmFlags line of the mapping of this process that holds `p`, or "" when none does.
inline std::string vm_flags_of_mapping_holding(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const SmapsMapping& m : smaps_mappings())
    if (m.lo <= a && a < m.hi) return m.flags;
  return "";
}

// Whether the flags hold `flag` as a whole word ("hg": MADV_HUGEPAGE, "nh": MADV_NOHUGEPAGE,
// "rr": MADV_RANDOM).
inline bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w)
    if (w == flag) return true;
  return false;
}

// Whether this kernel records `advice` as `flag` in the VmFlags of an advised anonymous mapping
// (no transparent huge pages, or a sandbox that accepts madvise as a no-op, record nothing). A
// control mapping this reader cannot find is a test failure, not a reason to skip.
inline bool kernel_records_advice(int advice, const std::string& flag) {
  const size_t n = size_t{4} << 20;
  void* control = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (control == MAP_FAILED) return false;
  const bool accepted = ::madvise(control, n, advice) == 0;
  const std::string flags = vm_flags_of_mapping_holding(control);
  ::munmap(control, n);
  if (flags.empty()) ADD_FAILURE() << "no VmFlags found for a mapping of this process in smaps";
  return accepted && has_flag(flags, flag);
}

// The mappings of the file at `canonical_path`, split by whether they carry `flag`.
struct FileMappings {
  std::vector<SmapsMapping> with, without;
  static size_t bytes(const std::vector<SmapsMapping>& ms) {
    size_t b = 0;
    for (const SmapsMapping& m : ms) b += m.hi - m.lo;
    return b;
  }
  static uint64_t rss_bytes(const std::vector<SmapsMapping>& ms) {
    uint64_t b = 0;
    for (const SmapsMapping& m : ms) b += m.rss_bytes;
    return b;
  }
};
inline FileMappings mappings_of_file(const std::string& canonical_path, const std::string& flag) {
  FileMappings out;
  for (const SmapsMapping& m : smaps_mappings())
    if (m.path == canonical_path) (has_flag(m.flags, flag) ? out.with : out.without).push_back(m);
  return out;
}

// Of the whole pages inside [p, p + n), how many this process has mapped in its page tables (the
// present bit of /proc/self/pagemap, which unprivileged processes may read; the page frame numbers
// they may not, and this needs none). A file page given back with MADV_DONTNEED is not present
// until touched again, though the page cache may still hold it (so mincore() would not tell).
// -1 when pagemap cannot be read.
inline int64_t present_pages(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return -1;
  int64_t present = 0;
  for (uintptr_t v = lo; v < hi && present >= 0; ++v) {
    uint64_t entry = 0;  // one 8-byte entry per page, read whole (pagemap takes no partial reads)
    if (::pread(fd, &entry, sizeof entry, static_cast<off_t>(v * sizeof entry)) != sizeof entry)
      present = -1;
    else
      present += static_cast<int64_t>((entry >> 63) & 1u);
  }
  ::close(fd);
  return present;
}

}  // namespace wick::test
