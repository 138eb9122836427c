// The errors the HTTP API answers with: the OpenAI error object {"error": {message, type, param,
// code}} and its HTTP status (serving.md §3.4). Thrown by the request parsers and handlers, caught
// by the router, which turns it into the reply.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "server/http.h"

namespace wick::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {},
           std::string code = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // empty: null
  const std::string& code() const { return code_; }    // empty: null
  // Extra headers of the reply (Retry-After, WWW-Authenticate).
  std::vector<std::pair<std::string, std::string>> headers;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error naming `param`.
inline ApiError bad_request(std::string param, std::string message) {
  return ApiError(400, "invalid_request_error", std::move(message), std::move(param));
}
inline ApiError not_found(std::string param, std::string message) {
  return ApiError(404, "not_found_error", std::move(message), std::move(param));
}
// 503 service_unavailable_error with Retry-After.
ApiError unavailable(std::string message, int retry_after_s = 1);

// The JSON body {"error": {...}}.
std::string error_body(const ApiError& e);
// The reply for `e` (status, body, headers).
HttpReply error_reply(const ApiError& e);

}  // namespace wick::server
