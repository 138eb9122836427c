#include "server/json_fields.h"

#include <algorithm>
#include <cmath>

#include "server/api_error.h"

namespace wick::server {

ApiError unavailable(std::string message, int retry_after_s) {
  ApiError e(503, "service_unavailable_error", std::move(message));
  e.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  return e;
}

std::string error_body(const ApiError& e) {
  Json err = {{"message", e.what()},
              {"type", e.type()},
              {"param", e.param().empty() ? Json() : Json(e.param())},
              {"code", e.code().empty() ? Json() : Json(e.code())}};
  return dump_json(Json{{"error", err}});
}

HttpReply error_reply(const ApiError& e) {
  HttpReply r;
  r.status = e.status();
  r.body = error_body(e);
  r.headers = e.headers;
  return r;
}

constexpr int kMaxJsonDepth = 64;

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::vector<int32_t> token_ids(const Json& a, const std::string& name, const std::string& param,
                               int vocab) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Json& t = a[i];
    const std::string at = "'" + name + "[" + std::to_string(i) + "]'";
    if (!t.is_number_integer() && !t.is_number_unsigned())
      throw bad_request(param, at + " must be a token id (integer), found " + json_type(t));
    const int64_t id = t.is_number_unsigned()
                           ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                           : t.get<int64_t>();
    if (id < 0 || id >= vocab)
      throw bad_request(param, at + " is token id " + std::to_string(id) +
                                   ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

Json parse_body(const std::string& body) {
  Json j;
  try {
    // Nesting is bounded: dumping a value recurses, and no request field needs more than a few
    // levels.
    j = Json::parse(body, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxJsonDepth)
        throw bad_request("", "the request body nests JSON deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw bad_request("", std::string("the request body is not valid JSON (") + e.what() +
                              "); send a JSON object with Content-Type: application/json");
  } catch (const Json::out_of_range& e) {
    // A number beyond the range of a double (1e400) anywhere in the body.
    throw bad_request("", std::string("the request body holds a number out of range (") +
                              e.what() + "); numbers must fit a 64-bit float");
  }
  if (!j.is_object())
    throw bad_request("", "the request body must be a JSON object, found " + json_type(j));
  return j;
}

std::string json_type(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

const Json* field(const Json& obj, std::string_view name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {
std::string p(std::string_view name, std::string_view param) {
  return std::string(param.empty() ? name : param);
}
std::string num(double v) {
  Json j = v;
  return j.dump();
}
}  // namespace

std::optional<bool> opt_bool(const Json& obj, std::string_view name, std::string_view param) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw bad_request(p(name, param), "'" + p(name, param) + "' must be a boolean, found " +
                                          json_type(*v));
  return v->get<bool>();
}

std::optional<double> opt_number(const Json& obj, std::string_view name, double lo, double hi,
                                 std::string_view param) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw bad_request(p(name, param), "'" + p(name, param) + "' must be a number, found " +
                                          json_type(*v));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    throw bad_request(p(name, param), "'" + p(name, param) + "' must be between " + num(lo) +
                                          " and " + num(hi) + ", found " + v->dump());
  return d;
}

std::optional<int64_t> opt_int(const Json& obj, std::string_view name, int64_t lo, int64_t hi,
                               std::string_view param) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  const std::string n = p(name, param);
  int64_t out = 0;
  if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    out = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             v->get<double>() == std::floor(v->get<double>()) &&
             std::fabs(v->get<double>()) < 9e18) {
    out = static_cast<int64_t>(v->get<double>());
  } else {
    throw bad_request(n, "'" + n + "' must be an integer, found " +
                             (v->is_number() ? v->dump() : json_type(*v)));
  }
  if (out < lo || out > hi)
    throw bad_request(n, "'" + n + "' must be between " + std::to_string(lo) + " and " +
                             std::to_string(hi) + ", found " + v->dump());
  return out;
}

std::optional<uint64_t> opt_uint64(const Json& obj, std::string_view name) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  const std::string n(name);
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i >= 0) return static_cast<uint64_t>(i);
  }
  throw bad_request(n, "'" + n + "' must be an integer between 0 and 18446744073709551615, found " +
                           (v->is_number() ? v->dump() : json_type(*v)));
}

std::optional<std::string> opt_string(const Json& obj, std::string_view name,
                                      std::string_view param) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    throw bad_request(p(name, param), "'" + p(name, param) + "' must be a string, found " +
                                          json_type(*v));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> opt_strings(const Json& obj, std::string_view name,
                                                    size_t max_items) {
  const Json* v = field(obj, name);
  if (!v) return std::nullopt;
  const std::string n(name);
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_items)
      throw bad_request(n, "'" + n + "' takes at most " + std::to_string(max_items) +
                               " strings, found " + std::to_string(v->size()));
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string())
        throw bad_request(n, "'" + n + "[" + std::to_string(i) + "]' must be a string, found " +
                                 json_type((*v)[i]));
      out.push_back((*v)[i].get<std::string>());
    }
  } else {
    throw bad_request(n, "'" + n + "' must be a string or an array of strings, found " +
                             json_type(*v));
  }
  for (const auto& s : out)
    if (s.empty()) throw bad_request(n, "'" + n + "' holds an empty string, which would match "
                                         "everywhere; remove it");
  return out;
}

}  // namespace wick::server
