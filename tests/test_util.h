// Shared helpers for the test suite: where the fixtures are, reading fixture tensors as floats,
// writing crafted files into a scratch folder.
#pragma once

// Defined in AddressSanitizer builds, by gcc (__SANITIZE_ADDRESS__) and clang (__has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define WICK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WICK_TEST_ASAN 1
#endif
#endif

// A test that cannot run in an AddressSanitizer build (it needs `ulimit -v`, or a process out of
// descriptors) is compiled there as DISABLED_<name> (CTest: "Not Run (Disabled)"), not skipped:
// in CI a skipped test is a failure (tests/check_no_skips.py).
#ifdef WICK_TEST_ASAN
#define WICK_NOT_UNDER_ASAN(name) DISABLED_##name
#else
#define WICK_NOT_UNDER_ASAN(name) name
#endif

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/tensor_set.h"
#include "kernels/thread_pool.h"
#include "wick/model.h"

namespace wick::test {

// A kernel thread pool for tests that call kernels directly (default: one thread per core).
// set_test_threads(n) replaces it (n <= 0: the default); not while a kernel runs.
kernels::ThreadPool& test_pool();
void set_test_threads(int threads);

// A deterministic synthetic checkpoint (wick synth) of `geometry` ("L:C[:vocab]"), loaded; the
// file is removed at once (the mapping keeps the bytes alive).
Model synthetic_model(const std::string& geometry, DType dtype, uint64_t seed);

// ../shared/fixtures (override with the environment variable WICK_FIXTURES).
std::string fixtures_dir();
// fixtures_dir() + "/" + rel. When it is missing the calling test ends (an exception) after
// printing "wick-test-skip: fixture missing: <path> ...", which CTest reports as skipped
// (tests/CMakeLists.txt: SKIP_REGULAR_EXPRESSION) - and CI, where every fixture is present, as a
// failure (tests/check_no_skips.py).
std::string fixture(const std::string& rel);
// A fresh, empty scratch folder for this test (under the build tree's temp dir).
std::filesystem::path scratch_dir();
void write_file(const std::filesystem::path& p, const std::string& bytes);
std::string read_file(const std::filesystem::path& p);

// Reads a whole safetensors fixture file.
io::TensorSet load_fixture_tensors(const std::string& rel);
// Copies tensor `name` of `set` out as floats (F32 only) / ints (I32 only); throws if absent.
std::vector<float> floats(const io::TensorSet& set, const std::string& name);
std::vector<int32_t> ints(const io::TensorSet& set, const std::string& name);

// Every non-empty line of a JSON-lines fixture (records split on LF only), parsed.
std::vector<nlohmann::json> read_jsonl(const std::string& rel);
// "c3a9" -> the bytes 0xc3 0xa9.
std::string from_hex(const std::string& hex);

// n values drawn from the standard normal distribution, seeded (the same n and seed give the same
// values).
std::vector<float> random_normal(size_t n, uint32_t seed);

// max |a[i] - b[i]|; the sizes must match.
double max_abs_diff(const float* a, const float* b, size_t n);
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() ? max_abs_diff(a.data(), b.data(), a.size()) : 1e30;
}

// One run of the `wick` binary built with the tests.
struct CliRun {
  int status = -1;   // exit status (-1: did not exit normally)
  std::string out;   // stdout
  std::string err;   // stderr
};
// Single-quotes `s` for /bin/sh.
std::string shell_quote(const std::string& s);
// Runs `wick ARGS` through /bin/sh (ARGS is shell text: quote paths), feeding `stdin_text`.
CliRun run_wick(const std::string& args, const std::string& stdin_text = "");

}  // namespace wick::test
