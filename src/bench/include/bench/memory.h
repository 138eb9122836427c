// This process's memory as benchmarks report it (wick's benchmark library), from Linux's
// /proc/self/status and /proc/self/smaps_rollup. Every function returns 0 / false where /proc is
// unavailable (not Linux, a sandbox without it) instead of throwing. Reading is thread-safe;
// reset_peak_resident() changes the process-wide peak that every thread's later
// peak_resident_bytes() sees.
#pragma once

#include <cstdint>
#include <iosfwd>

namespace wick::bench {

// Resident set size now ("VmRSS"), in bytes.
uint64_t resident_bytes();
// Peak resident set size ("VmHWM"), in bytes: since the process started or the last
// reset_peak_resident().
uint64_t peak_resident_bytes();
// Resets the peak to the current resident size (writes "5" to /proc/self/clear_refs, Linux >=
// 4.0), so a later peak_resident_bytes() gives the peak from now on. False where it cannot.
bool reset_peak_resident();
// Resident bytes this process maps in huge (PMD-sized, 2 MiB on x86-64) pages now: anonymous
// ("AnonHugePages"), file ("FilePmdMapped", e.g. model weights mapped with MADV_HUGEPAGE) and
// shared memory ("ShmemPmdMapped") from /proc/self/smaps_rollup (Linux >= 4.14).
uint64_t huge_page_resident_bytes();
// The same sum over the lines of an smaps_rollup text ("Key:   N kB"); what
// huge_page_resident_bytes() parses, exposed to test it on known text.
uint64_t huge_page_bytes_of_smaps(std::istream& smaps_rollup);
// Bytes this process can hold: physical memory, or the address-space limit (ulimit -v) if lower.
uint64_t memory_limit_bytes();

}  // namespace wick::bench
