// Requests from bytes: Boost.Beast's HTTP/1.1 parser with the transport's limits, and the one
// conversion of Beast's parsed request into the socket-free HttpRequest (http.h). The transport
// (http_server.cpp) reads from a socket with the same parser and converts with the same function;
// the fuzzer of the router (tests/fuzz) parses whole requests from bytes.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http.h"

namespace wick::server {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;

// Method, target, path (the target without its query), headers (names lower-cased, in order),
// body and keep-alive of a parsed request. Moves the body out of `req`.
HttpRequest to_http_request(BeastRequest& req);

// Parses one complete request (head and body) at the start of `bytes`, with the transport's
// limits. Returns nullopt, with `error` set to Beast's reason, when the bytes are not a complete,
// well-formed request within the limits (the transport answers 400 or 413 then). Never throws
// except std::bad_alloc.
std::optional<HttpRequest> parse_http_request(std::string_view bytes, size_t max_header_bytes,
                                              size_t max_body_bytes, std::string* error = nullptr);

}  // namespace wick::server
