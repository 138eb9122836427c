// Parsing JSON that comes from files (safetensors headers, config.json, shard indexes) with limits
// checked while parsing, so a hostile file cannot make wick build a huge or deeply nested value
// (nlohmann's dump() is recursive: deep nesting would overflow the stack when printed).
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace wick::io {

struct JsonLimits {
  int max_depth = 8;           // containers nested deeper than this are refused
  size_t max_array = 1 << 20;  // elements of any one array
};

// Parses `text`; throws FormatError(path, "", "...", "...") naming `what` (e.g. "safetensors
// header") on invalid JSON or when a limit is exceeded.
// `on_key`, if set, sees every object key with its depth (1 = keys of the top-level object).
nlohmann::json parse_json_limited(
    std::string_view text, const std::string& path, const std::string& what,
    const JsonLimits& limits,
    const std::function<void(int depth, const std::string& key)>& on_key = nullptr);

// A short description of a value for error messages: scalars as JSON (long strings cut),
// containers as "an array of N elements" / "an object of N keys".
std::string brief_json(const nlohmann::json& j);

}  // namespace wick::io
