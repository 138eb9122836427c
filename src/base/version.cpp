#include "wick/version.h"

// WICK_VERSION_STRING is set on this file alone by src/CMakeLists.txt from PROJECT_VERSION.
namespace wick {

std::string_view version() {
  return WICK_VERSION_STRING;
}

}  // namespace wick
