// Requests from bytes (http_request.h).
#include "server/http_request.h"

#include <boost/asio/buffer.hpp>
#include <cctype>

namespace wick::server {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

HttpRequest to_http_request(BeastRequest& req) {
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : req) r.headers.emplace_back(lower(f.name_string()), std::string(f.value()));
  r.body = std::move(req.body());
  r.keep_alive = req.keep_alive();
  return r;
}

std::optional<HttpRequest> parse_http_request(std::string_view bytes, size_t max_header_bytes,
                                              size_t max_body_bytes, std::string* error) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(max_header_bytes));
  parser.body_limit(max_body_bytes);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (!ec && !parser.is_done() && used < bytes.size()) {
    const size_t n =
        parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (n == 0 && !ec) break;  // needs more bytes than there are
    used += n;
  }
  if (!ec && !parser.got_some()) ec = http::error::partial_message;  // no bytes of a request
  if (!ec && !parser.is_done()) {
    parser.put_eof(ec);
    if (!ec && !parser.is_done()) ec = http::error::partial_message;
  }
  if (ec) {
    if (error) *error = ec.message();
    return std::nullopt;
  }
  return to_http_request(parser.get());
}

}  // namespace wick::server
