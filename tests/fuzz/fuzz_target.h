// wick's fuzz targets (README "Reliability"): one per input wick reads from people it does not
// know. Each target feeds one input to the real loader and checks the loader's contract, not only
// "no crash":
//   - accepted input yields a consistent object (sizes match the bytes, ids in range, ...);
//   - refused input throws one of wick's typed errors (wick::Error subclasses);
//   - anything else - another exception type (std::bad_alloc included: a loader must refuse a
//     size before allocating it), a failed consistency check - is a contract violation, reported
//     with the target, the input and what was wrong, and ends the process with abort() (so
//     libFuzzer keeps the input, and the replay test fails).
// The same target code runs under libFuzzer (fuzz_main.cpp, clang build with WICK_FUZZ=ON) and in
// the ordinary test suite (replay.cpp replays tests/fuzz/corpus/<target>/ and the kept
// regression inputs in tests/fuzz/regressions/<target>/ under an address-space limit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace wick::fuzz {

using Bytes = std::span<const uint8_t>;

struct Target {
  std::string_view name;   // e.g. "safetensors": the fuzzer is fuzz_<name>, the corpus corpus/<name>
  std::string_view input;  // what the bytes are, for messages and the README
  void (*check)(Bytes input);
};

// Every target, in a fixed order.
std::span<const Target> targets();
// The target called `name`, or null.
const Target* find_target(std::string_view name);

// Runs `t.check` on `input`: returns when the input was accepted (an empty string) or refused
// with a wick::Error (its message); reports a violation (and aborts) otherwise.
std::string run(const Target& t, Bytes input);

// Reports a broken contract (target, what) on stderr and aborts.
[[noreturn]] void violated(const std::string& what);

// The input as text (JSON, vocabulary files, HTTP requests).
inline std::string_view as_text(Bytes b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Writes the input to a file of this process (for loaders that take a path) and returns its
// path; each call with the same `suffix` overwrites the same file. The folder is $TMPDIR (or
// /tmp)/wick-fuzz-<pid>, removed at exit.
std::string input_file(Bytes input, std::string_view suffix);

}  // namespace wick::fuzz

// Checks a contract condition; on failure reports `what` (a std::string expression) and aborts.
#define WICK_FUZZ_EXPECT(cond, what)                                                          \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::wick::fuzz::violated(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " +   \
                             "expected " #cond ": " + (what));                               \
  } while (0)
