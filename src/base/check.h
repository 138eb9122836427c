// WICK_CHECK: the one way wick's own code states a precondition that only a bug in wick can break
// (a kernel handed a view the loader never builds, an impossible dtype). Input problems are never
// checked with it: they get the typed errors of wick/errors.h with a message for the user.
//
//   WICK_CHECK(w.stride == int8_padded_cols(w.cols), "Int8Linear builds valid views");
//
// On failure it throws wick::InternalError whose message names the source file, the line, the
// condition as written and `why` (the CLI reports it as an internal error, exit 2). Thrown on a
// kernel pool worker (inside a parallel_for block) the exception cannot be carried back, and the
// process ends through std::terminate, which prints the same message. Costs one predictable
// branch; the condition is evaluated exactly once.
#pragma once

namespace wick::base {

[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* why);

}  // namespace wick::base

#define WICK_CHECK(condition, why)                                       \
  do {                                                                   \
    if (__builtin_expect(!(condition), 0))                               \
      ::wick::base::check_failed(__FILE__, __LINE__, #condition, (why)); \
  } while (0)
