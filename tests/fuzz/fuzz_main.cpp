// libFuzzer entry point of one target: fuzz_<name> is this file compiled with
// WICK_FUZZ_TARGET="<name>" (tests/fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_target.h"

namespace {

const wick::fuzz::Target& target() {
  static const wick::fuzz::Target* t = [] {
    const wick::fuzz::Target* found = wick::fuzz::find_target(WICK_FUZZ_TARGET);
    if (!found) {
      std::fprintf(stderr, "wick fuzz: no target named %s\n", WICK_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::run(target(), wick::fuzz::Bytes(data, size));
  return 0;
}
