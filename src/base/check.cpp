// WICK_CHECK's failure path (base/check.h).
#include "base/check.h"

#include <string>

#include "wick/errors.h"

namespace wick::base {

void check_failed(const char* file, int line, const char* condition, const char* why) {
  throw InternalError(std::string("internal error in wick at ") + file + ":" +
                      std::to_string(line) + ": check failed: " + condition + " (" + why +
                      "); this is a bug in wick, please report it with the command that ran");
}

}  // namespace wick::base
