#include "bench/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

namespace wick::bench {
namespace {

// The value of a "key:   N kB" line, in bytes, when `line` is that key's line.
bool kb_line_bytes(const std::string& line, const char* key, uint64_t* bytes) {
  const size_t n = std::strlen(key);
  if (line.compare(0, n, key) != 0 || line.size() <= n || line[n] != ':') return false;
  *bytes = std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  return true;
}

// The "key:   N kB" line of /proc/self/status, in bytes (0 where absent).
uint64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  uint64_t bytes = 0;
  while (std::getline(f, line))
    if (kb_line_bytes(line, key, &bytes)) return bytes;
  return 0;
}

}  // namespace

uint64_t resident_bytes() {
  return proc_status_bytes("VmRSS");
}
uint64_t peak_resident_bytes() {
  return proc_status_bytes("VmHWM");
}

bool reset_peak_resident() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

uint64_t huge_page_bytes_of_smaps(std::istream& smaps_rollup) {
  uint64_t total = 0, bytes = 0;
  std::string line;
  while (std::getline(smaps_rollup, line))
    for (const char* key : {"AnonHugePages", "FilePmdMapped", "ShmemPmdMapped"})
      if (kb_line_bytes(line, key, &bytes)) total += bytes;
  return total;
}

uint64_t huge_page_resident_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  return f ? huge_page_bytes_of_smaps(f) : 0;
}

uint64_t memory_limit_bytes() {
  uint64_t limit = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  struct rlimit r {};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    limit = std::min<uint64_t>(limit, r.rlim_cur);
  return limit;
}

}  // namespace wick::bench
