// Reading this process's mappings from /proc/self/smaps in tests: the VmFlags of the mapping that
// holds an address, every mapping of a file with its size and flags, and whether an madvise()
// advice shows in the VmFlags at all on this kernel (a control for tests that look for it).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace wick::test {

// One mapping of /proc/self/smaps: [lo, hi), the path it maps ("" for anonymous memory), and
// its VmFlags line.
struct SmapsMapping {
  uintptr_t lo = 0, hi = 0;
  std::string path;
  std::string flags;
};

// Every mapping of this process, in address order. A block's header is "lo-hi perms offset dev
// inode [path]"; VmFlags is the last line of each block.
inline std::vector<SmapsMapping> smaps_mappings() {
  std::vector<SmapsMapping> out;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    int used = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &used) == 2 && used > 0) {
      out.push_back({lo, hi, line.substr(static_cast<size_t>(used)), ""});
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
// (no transparent huge pages, or a sandbox that accepts madvise as a no-op, record nothing).
inline bool kernel_records_advice(int advice, const std::string& flag) {
  const size_t n = size_t{4} << 20;
  void* control = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (control == MAP_FAILED) return false;
  const bool recorded =
      ::madvise(control, n, advice) == 0 && has_flag(vm_flags_of_mapping_holding(control), flag);
  ::munmap(control, n);
  return recorded;
}

}  // namespace wick::test
