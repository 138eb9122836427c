// Typed readers of request-body fields (serving.md §3): unknown fields are ignored, a known field
// of the wrong type or outside its range is a 400 naming it in `param`. A field that is absent or
// null reads as "not given" (std::nullopt), as the OpenAI API treats null.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wick::server {

using Json = nlohmann::json;

// The request body as a JSON object. Throws ApiError 400 (param null) for a body that is not JSON
// or not an object, naming where parsing stopped.
Json parse_body(const std::string& body);

// The JSON type name of a value as OpenAI's messages say it ("string", "number", "array", ...).
std::string json_type(const Json& v);

// A field, or null when absent or null.
const Json* field(const Json& obj, std::string_view name);

std::optional<bool> opt_bool(const Json& obj, std::string_view name, std::string_view param = {});
// A finite number in [lo, hi].
std::optional<double> opt_number(const Json& obj, std::string_view name, double lo, double hi,
                                 std::string_view param = {});
// An integer (a JSON integer, or a number with no fraction) in [lo, hi].
std::optional<int64_t> opt_int(const Json& obj, std::string_view name, int64_t lo, int64_t hi,
                               std::string_view param = {});
// A non-negative integer up to 2^64 - 1 (seeds).
std::optional<uint64_t> opt_uint64(const Json& obj, std::string_view name);
std::optional<std::string> opt_string(const Json& obj, std::string_view name,
                                      std::string_view param = {});
// A string or an array of strings (OpenAI's `stop`), at most `max_items`, each non-empty.
// A JSON array of token ids, each an integer in [0, vocab). Throws 400 naming `param`; `name` is
// how the array is called in the message ("prompt[1]", "tokens").
std::vector<int32_t> token_ids(const Json& array, const std::string& name,
                               const std::string& param, int vocab);

// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string dump_json(const Json& j);

std::optional<std::vector<std::string>> opt_strings(const Json& obj, std::string_view name,
                                                    size_t max_items);

}  // namespace wick::server
