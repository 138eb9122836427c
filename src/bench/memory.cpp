#include "bench/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

namespace wick::bench {
namespace {

// The "key:   N kB" line of /proc/self/status, in bytes (0 where absent).
uint64_t proc_status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  }
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

uint64_t memory_limit_bytes() {
  uint64_t limit = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  struct rlimit r {};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    limit = std::min<uint64_t>(limit, r.rlim_cur);
  return limit;
}

}  // namespace wick::bench
