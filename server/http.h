// The socket-free side of HTTP: a parsed request, a complete reply, and the Exchange through which
// a handler answers one request - at once, later (from another thread), or as a stream. The API
// layer (api.h) sees only these types; the Boost.Beast transport (http_server.h) implements
// Exchange, and a test or a fuzzer can implement it without a socket.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // as sent: path and query
  std::string path;    // target without the query string
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;    // the whole body (bounded by the server's body limit)
  bool keep_alive = true;

  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view name) const;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
};

// The answer side of one request. Thread-safe: the engine thread streams through it while the
// I/O thread writes. Exactly one of reply() or start_stream() ... end() is used; later calls are
// ignored.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // A complete response.
  virtual void reply(HttpReply reply) = 0;
  // Starts a streamed response (chunked transfer encoding) with `head`'s status and headers (its
  // body is sent first). While the stream is silent for the transport's keep-alive interval, the
  // transport sends `keepalive` (an SSE comment such as ": ping\n\n"; empty: nothing).
  virtual void start_stream(HttpReply head, std::string keepalive = {}) = 0;
  // Queues bytes of the stream. False when the client is gone or has left more than the
  // transport's limit unread (the caller should then stop producing: cancel the request).
  virtual bool send(std::string data) = 0;
  // Ends the stream (after what was queued is written).
  virtual void end() = 0;
  // Drops the connection without completing the response (a stream whose client stopped
  // reading: a truncated stream must not look complete).
  virtual void abort() = 0;
  // `fn` runs once, on the transport's thread, if the client goes away (closes, resets, or times
  // out) before the response is complete; at once if it already has. Must not block.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  // The client is known to be gone.
  virtual bool gone() const = 0;
};

// Handles one request. Runs on the transport's I/O thread: it must not block (hand long work to
// another thread, which answers through the Exchange).
using Handler = std::function<void(HttpRequest&& request, std::shared_ptr<Exchange> exchange)>;

// "OK", "Not Found", ... for a status code ("Unknown" otherwise).
std::string_view status_reason(int status);

}  // namespace wick::server
