// Text helpers of the base layer, shared by every layer above it (io, quant, model, tasks, cli).
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace wick::base {

// A tensor shape as every wick message writes it: "[2, 3, 4]", "[7]", "[]" for a scalar.
std::string shape_string(std::span<const int64_t> shape);

}  // namespace wick::base
