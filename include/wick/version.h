// The library's version: the one place it is written is the top-level CMakeLists.txt
// (project(wick VERSION ...)); the CLI's --version, the engine_version of state files and the
// Python package's wick.__version__ all read it from here.
#pragma once

#include <string_view>

namespace wick {

// "MAJOR.MINOR.PATCH" (e.g. "0.1.0"). Thread-safe; the view points at static storage.
std::string_view version();

}  // namespace wick
