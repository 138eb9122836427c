// The HTTP/1.1 transport of `wick serve`, on Boost.Beast/Asio (the only translation unit that
// includes them): keep-alive, header and body limits, read / idle / write timeouts, Expect:
// 100-continue, TCP_NODELAY, streamed responses with keep-alive comments, and client disconnect
// detection while a response is pending. One I/O thread runs every connection (idle connections
// cost a socket and a few hundred bytes, never a thread).
//
// What a client gets at the transport level:
//   * a request whose headers exceed max_header_bytes, or whose body (Content-Length or chunked)
//     exceeds max_body_bytes: 413 and the connection is closed;
//   * no complete request within read_timeout of its first byte (slowloris), or no first byte
//     within idle_timeout on a kept-alive connection: the connection is closed;
//   * malformed HTTP: 400 and close;
//   * a response it does not read: once idle_timeout passes without a write completing, the
//     connection is closed (and the stream's producer told through Exchange::send() / the
//     disconnect callback).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http.h"

namespace wick::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see HttpServer::port())
  size_t max_header_bytes = 64 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds idle_timeout{60000};
  // A stream's bytes queued and not yet written past which Exchange::send() refuses.
  size_t max_unsent_bytes = 4 * 1024 * 1024;
  std::chrono::milliseconds keepalive_interval{2000};
  // Connections beyond this are accepted and closed at once. The server holds at most
  // min(max_connections, RLIMIT_NOFILE's soft limit - kDescriptorMargin) (read at construction),
  // so idle connections cannot use up the descriptors the rest of the process needs; if
  // descriptors still run out (accept fails with EMFILE), the open connections go on being served
  // and accepting resumes when one frees.
  int max_connections = 4096;
  // Headers sent with every response, transport errors included (e.g. X-Wick-Replica).
  std::vector<std::pair<std::string, std::string>> response_headers;
};

// Descriptors left to the rest of the process (standard streams, the event loop, model and state
// files, a connection accepted only to be closed) when sizing max_connections.
inline constexpr int kDescriptorMargin = 64;

class HttpServer {
 public:
  // Binds and listens. Throws InputError for a host that is not an IP address, or naming the
  // address when it cannot bind (in use, no permission).
  HttpServer(HttpServerOptions options, Handler handler);
  // Stops and joins.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the chosen one when options.port was 0).
  uint16_t port() const;
  // Adds a header to every response (as HttpServerOptions::response_headers); before start() only.
  void add_response_header(std::string name, std::string value);
  // Starts the I/O thread.
  void start();
  // Closes every connection and joins the I/O thread. Idempotent; safe from any thread but the
  // I/O thread.
  void stop();
  // Connections open now (from any thread).
  int connections() const;
  // The most connections held at once: options.max_connections within the descriptor limit.
  int max_connections() const;
  // Responses not yet fully written (from any thread).
  int pending_responses() const;

  struct Impl;  // http_server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wick::server
