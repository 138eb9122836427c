#include "io/json_limits.h"

#include <vector>

#include "wick/errors.h"

namespace wick::io {

using nlohmann::json;

json parse_json_limited(std::string_view text, const std::string& path, const std::string& what,
                        const JsonLimits& limits,
                        const std::function<void(int, const std::string&)>& on_key) {
  struct Open {
    bool is_array;
    size_t count;
  };
  std::vector<Open> open;
  auto element = [&]() {
    if (!open.empty() && open.back().is_array && ++open.back().count > limits.max_array) {
      throw FormatError(
          path, "", what + " arrays of at most " + std::to_string(limits.max_array) + " elements",
          "a longer array");
    }
  };
  try {
    return json::parse(
        text.begin(), text.end(),
        [&](int depth, json::parse_event_t event, json& parsed) {
          switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
              element();
              if (depth >= limits.max_depth) {
                throw FormatError(
                    path, "",
                    what + " nested at most " + std::to_string(limits.max_depth) + " levels deep",
                    "deeper nesting");
              }
              open.push_back({event == json::parse_event_t::array_start, 0});
              break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
              if (!open.empty()) open.pop_back();
              break;
            case json::parse_event_t::value:
              element();
              break;
            case json::parse_event_t::key:
              if (on_key) on_key(depth, parsed.get<std::string>());
              break;
          }
          return true;
        },
        /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    throw FormatError(path, "", "well-formed JSON in the " + what,
                      std::string("invalid JSON (") + e.what() + ")");
  }
}

std::string brief_json(const json& j) {
  if (j.is_array()) return "an array of " + std::to_string(j.size()) + " elements";
  if (j.is_object()) return "an object of " + std::to_string(j.size()) + " keys";
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace wick::io
