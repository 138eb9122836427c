// Boost.Beast/Asio transport (see http_server.h). Beast parses requests; responses are written as
// plain bytes (status line, headers, Content-Length or chunked framing), which keeps the template
// weight of this file small. Everything on the socket happens on the one I/O thread; the only
// cross-thread object is ExchangeImpl (a mutex-guarded outbox that posts to the I/O thread).
#include "server/http_server.h"
#include "server/http_request.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "wick/errors.h"

namespace wick::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

std::string_view status_reason(int status) {
  const beast::string_view r = http::obsolete_reason(static_cast<http::status>(status));
  return {r.data(), r.size()};
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string head_lines(int status, const std::string& content_type,
                       const std::vector<std::pair<std::string, std::string>>& extra,
                       bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_reason(status)) +
                  "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  return h;
}

// `head_only`: the answer to a HEAD request (headers, no body).
std::string serialize_reply(const HttpReply& r, bool keep_alive, bool head_only = false) {
  const bool no_body = r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200);
  std::string s = head_lines(r.status, no_body ? "" : r.content_type, r.headers, keep_alive);
  if (!no_body) s += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  s += "\r\n";
  if (!no_body && !head_only) s.reserve(s.size() + r.body.size());
  if (!no_body && !head_only) s += r.body;
  return s;
}

std::string chunk(std::string_view data) {
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string c(size, static_cast<size_t>(n));
  c.append(data);
  c += "\r\n";
  return c;
}

std::string error_json(std::string_view message, std::string_view type) {
  // Transport-level errors: fixed ASCII messages, no escaping needed.
  return "{\"error\":{\"message\":\"" + std::string(message) + "\",\"type\":\"" +
         std::string(type) + "\",\"param\":null,\"code\":null}}";
}

class Session;

// The I/O side a connection's exchanges post to; `ioc` is cleared when the server stops, so a
// producer that outlives the server posts nowhere.
struct Hub {
  std::mutex mutex;
  net::io_context* ioc = nullptr;
  // HttpServerOptions::response_headers (set before the server starts, then read-only).
  std::vector<std::pair<std::string, std::string>> response_headers;
};

class ExchangeImpl final : public Exchange, public std::enable_shared_from_this<ExchangeImpl> {
 public:
  // `chunked`: the client speaks HTTP/1.1 (a stream to an HTTP/1.0 client is sent unframed and
  // ends with the connection); `head_only`: a HEAD request.
  ExchangeImpl(std::weak_ptr<Session> session, std::shared_ptr<Hub> hub, bool keep_alive,
               size_t max_unsent, bool chunked, bool head_only)
      : session_(std::move(session)),
        hub_(std::move(hub)),
        keep_alive_(keep_alive),
        max_unsent_(max_unsent),
        chunked_(chunked),
        head_only_(head_only) {}

  void reply(HttpReply r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ != Mode::kNone) return;
    mode_ = Mode::kReply;
    status_ = r.status;
    r.headers.insert(r.headers.end(), hub_->response_headers.begin(), hub_->response_headers.end());
    out_ = serialize_reply(r, keep_alive_, head_only_);  // nothing queued before: no copy
    ended_ = true;
    schedule_locked();
  }

  void start_stream(HttpReply head, std::string keepalive) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ != Mode::kNone) return;
    mode_ = Mode::kStream;
    status_ = head.status;
    keepalive_ = std::move(keepalive);
    head.headers.insert(head.headers.end(), hub_->response_headers.begin(),
                        hub_->response_headers.end());
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.headers.emplace_back("X-Accel-Buffering", "no");
    if (chunked_) head.headers.emplace_back("Transfer-Encoding", "chunked");
    out_ += head_lines(head.status, head.content_type, head.headers, keep_alive_ && chunked_) +
            "\r\n";
    if (!head.body.empty()) out_ += frame(head.body);
    schedule_locked();
  }

  bool send(std::string data) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (gone_ || mode_ != Mode::kStream || ended_) return false;
    if (unsent_ > max_unsent_) return false;
    if (data.empty()) return true;
    out_ += frame(data);
    unsent_ += data.size();
    schedule_locked();
    return true;
  }

  void end() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ != Mode::kStream || ended_) return;
    if (chunked_) out_ += "0\r\n\r\n";
    ended_ = true;
    schedule_locked();
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ && out_.empty()) return;
    aborted_ = ended_ = true;
    out_.clear();
    schedule_locked();
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }
  // An unframed stream (HTTP/1.0) ends by closing the connection.
  bool close_after() const { return mode_ == Mode::kStream && !chunked_; }

  void on_disconnect(std::function<void()> fn) override {
    bool now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (gone_) {
        now = true;
      } else {
        on_gone_ = std::move(fn);
      }
    }
    if (now && fn) post([fn = std::move(fn)] { fn(); });
  }

  bool gone() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return gone_;
  }

  // ---- I/O thread side ----
  // The bytes to write next (empty: nothing now) and whether the exchange is then complete.
  std::pair<std::string, bool> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    scheduled_ = false;
    std::string out;
    out.swap(out_);
    return {std::move(out), ended_ && out_.empty()};
  }
  void written_stream_bytes(size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    unsent_ = unsent_ > n ? unsent_ - n : 0;
  }
  bool streaming() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return mode_ == Mode::kStream && !ended_;
  }
  void queue_keepalive() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ == Mode::kStream && !ended_ && !keepalive_.empty() && out_.empty())
      out_ += frame(keepalive_);
  }
  void mark_gone() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (gone_ || complete_) return;
      gone_ = true;
      fn = std::move(on_gone_);
    }
    if (fn) fn();
  }
  void mark_complete() {
    std::lock_guard<std::mutex> lock(mutex_);
    complete_ = true;
    on_gone_ = nullptr;
  }
  bool complete() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return complete_;
  }

 private:
  enum class Mode { kNone, kReply, kStream };
  void schedule_locked();
  std::string frame(std::string_view data) const {
    return chunked_ ? chunk(data) : std::string(data);
  }
  void post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(hub_->mutex);
    if (hub_->ioc) net::post(*hub_->ioc, std::move(fn));
  }

  const std::weak_ptr<Session> session_;
  const std::shared_ptr<Hub> hub_;
  const bool keep_alive_;
  const size_t max_unsent_;
  const bool chunked_, head_only_;
  mutable std::mutex mutex_;
  Mode mode_ = Mode::kNone;
  int status_ = 0;
  std::string out_;
  std::string keepalive_;
  size_t unsent_ = 0;
  bool ended_ = false, gone_ = false, complete_ = false, scheduled_ = false, aborted_ = false;
  std::function<void()> on_gone_;
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opt;
  Handler handler;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::shared_ptr<Hub> hub = std::make_shared<Hub>();
  std::thread thread;
  std::atomic<int> connections{0};
  int max_connections = 0;  // opt.max_connections within the descriptor limit
  std::atomic<int> pending{0};
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;  // I/O thread only
  std::mutex stop_mutex;
  bool stopped = false;

  void accept();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& srv, tcp::socket socket)
      : srv_(srv), sock_(std::move(socket)), timer_(srv.ioc), ping_(srv.ioc) {}

  void start() {
    beast::error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    do_idle();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
    timer_.cancel();
    ping_.cancel();
    if (ex_) {
      ex_->mark_gone();
      finish_pending();
    }
    srv_.sessions.erase(this);
    --srv_.connections;
    keep_.reset();  // may destroy this session: nothing after this line
  }

  void pump(const std::shared_ptr<ExchangeImpl>& ex) {
    if (closed_ || ex != ex_ || writing_) return;
    if (ex_->aborted()) return close();
    auto [data, complete] = ex_->take();
    if (data.empty()) {
      if (complete) finish_exchange();
      return;
    }
    writing_ = true;
    wbuf_ = std::move(data);
    arm(srv_.opt.idle_timeout);  // a client that does not read its response is dropped
    net::async_write(sock_, net::buffer(wbuf_),
                     [self = shared_from_this(), ex](beast::error_code ec, size_t n) {
                       self->writing_ = false;
                       if (self->closed_) return;
                       self->disarm();
                       if (ec) return self->close();
                       ex->written_stream_bytes(n);
                       self->last_write_ = Clock::now();
                       if (!self->ping_armed_ && ex->streaming()) self->arm_ping();
                       self->pump(ex);
                     });
  }

 private:
  void arm(std::chrono::milliseconds d) {
    const uint64_t g = ++timer_gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), g](beast::error_code ec) {
      if (ec || g != self->timer_gen_ || self->closed_) return;
      self->close();
    });
  }
  void disarm() {
    ++timer_gen_;
    timer_.cancel();
  }

  void arm_ping() {
    ping_armed_ = true;
    ping_.expires_after(srv_.opt.keepalive_interval);
    ping_.async_wait([self = shared_from_this(), ex = ex_](beast::error_code ec) {
      self->ping_armed_ = false;
      if (ec || self->closed_ || ex != self->ex_ || !ex->streaming()) return;
      if (Clock::now() - self->last_write_ >= self->srv_.opt.keepalive_interval) {
        ex->queue_keepalive();
        self->pump(ex);
      }
      self->arm_ping();
    });
  }

  void do_idle() {
    if (closed_) return;
    if (buf_.size() > 0) return do_read_header();  // a pipelined request is already here
    arm(srv_.opt.idle_timeout);
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->closed_) return;
      if (ec) {
        if (ec != net::error::operation_aborted) self->close();
        return;
      }
      self->do_read_header();
    });
  }

  void do_read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_.opt.max_header_bytes));
    parser_->body_limit(srv_.opt.max_body_bytes);
    arm(srv_.opt.read_timeout);  // the whole request, from its first byte
    http::async_read_header(sock_, buf_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->on_header(ec);
                            });
  }

  // Transport errors: 413 past a limit, 400 for malformed HTTP, else just close.
  bool refuse(beast::error_code ec) {
    if (ec == http::error::header_limit || ec == http::error::body_limit) {
      fail_and_close(413, error_json(ec == http::error::header_limit
                                         ? "request headers larger than the server's limit"
                                         : "request body larger than the server's limit "
                                           "(--max-body-bytes)",
                                     "request_too_large"));
      return true;
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      fail_and_close(400, error_json("malformed HTTP request", "invalid_request_error"));
      return true;
    }
    close();
    return true;
  }

  void fail_and_close(int status, std::string body) {
    HttpReply r;
    r.status = status;
    r.body = std::move(body);
    r.headers = srv_.hub->response_headers;
    wbuf_ = serialize_reply(r, false);
    disarm();
    arm(srv_.opt.read_timeout);
    writing_ = true;
    net::async_write(sock_, net::buffer(wbuf_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec || self->closed_) return self->close();
                       self->linger_close();
                     });
  }

  // Closes after the client has read the answer: shut down our sending side, discard what the
  // client still sends (a refused body) until it closes or a second passes, then close. Closing
  // with unread bytes would send a reset that can destroy the answer in flight.
  void linger_close() {
    beast::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    arm(std::chrono::milliseconds(1000));
    drain_input();
  }
  void drain_input() {
    sock_.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec,
                                                                             size_t) {
      if (self->closed_) return;
      if (ec) return self->close();
      self->drain_input();
    });
  }

  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      refuse(ec);
      return;
    }
    const auto& req = parser_->get();
    const auto expect = req[http::field::expect];
    if (!expect.empty() && lower(std::string_view(expect.data(), expect.size())) == "100-continue" &&
        !parser_->is_done()) {
      wbuf_ = "HTTP/1.1 100 Continue\r\n\r\n";
      writing_ = true;
      net::async_write(sock_, net::buffer(wbuf_),
                       [self = shared_from_this()](beast::error_code ec2, size_t) {
                         self->writing_ = false;
                         if (self->closed_) return;
                         if (ec2) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_body({});
    http::async_read(sock_, buf_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->on_body(ec);
                     });
  }

  void on_body(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      refuse(ec);
      return;
    }
    disarm();
    auto& req = parser_->get();
    const bool http11 = req.version() >= 11;
    HttpRequest r = to_http_request(req);
    keep_alive_ = r.keep_alive;
    parser_.reset();
    ex_ = std::make_shared<ExchangeImpl>(weak_from_this(), srv_.hub, keep_alive_,
                                         srv_.opt.max_unsent_bytes, http11,
                                         r.method == "HEAD");
    keep_ = shared_from_this();  // alive while the response is pending, watched or not
    ++srv_.pending;
    pending_counted_ = true;
    watch(ex_);
    try {
      srv_.handler(std::move(r), ex_);
    } catch (const std::exception& e) {
      HttpReply err;
      err.status = 500;
      err.body = error_json("internal error while handling the request", "server_error");
      ex_->reply(std::move(err));
    }
  }

  // Watches the socket while a response is pending: end of stream or an error means the client
  // closed (or reset) the connection, and the request is cancelled. Bytes that arrive meanwhile
  // (a pipelined request) are kept in buf_ for the next request and the watch goes on, so a
  // client that pipelines and then closes is still seen leaving; only past max_pipelined_bytes
  // does it stop reading (TCP then holds the client back) and the watch ends.
  void watch(const std::shared_ptr<ExchangeImpl>& ex) {
    watching_ = true;
    sock_.async_read_some(
        net::buffer(peek_), [self = shared_from_this(), ex](beast::error_code ec, size_t n) {
          self->watching_ = false;
          if (self->closed_) return;
          if (n > 0) {
            auto dst = self->buf_.prepare(n);
            std::memcpy(dst.data(), self->peek_.data(), n);
            self->buf_.commit(n);
          }
          if (ex != self->ex_) {  // the response completed: go on with the connection
            if (self->resume_idle_) {
              self->resume_idle_ = false;
              self->do_idle();
            }
            return;
          }
          if (ec == net::error::operation_aborted) return;
          if (ec) return self->close();  // end of stream or reset: the client is gone
          if (self->buf_.size() < self->srv_.opt.max_header_bytes + self->srv_.opt.max_body_bytes)
            self->watch(ex);
        });
  }

  void finish_pending() {
    if (pending_counted_) {
      pending_counted_ = false;
      --srv_.pending;
    }
  }

  void finish_exchange() {
    const bool close_after = ex_->close_after();
    ex_->mark_complete();
    ex_.reset();
    finish_pending();
    ping_.cancel();
    ping_armed_ = false;
    const std::shared_ptr<Session> self = std::move(keep_);
    if (!keep_alive_ || close_after) {
      if (watching_) {
        beast::error_code ec;
        sock_.cancel(ec);  // the disconnect watch: its handler sees the exchange done
      }
      linger_close();
      return;
    }
    if (watching_) {
      // The disconnect watch may hold pipelined bytes: the next request starts once it returned.
      resume_idle_ = true;
      beast::error_code ec;
      sock_.cancel(ec);
      return;
    }
    do_idle();
  }

  HttpServer::Impl& srv_;
  tcp::socket sock_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer timer_, ping_;
  uint64_t timer_gen_ = 0;
  std::shared_ptr<ExchangeImpl> ex_;
  std::string wbuf_;
  std::array<char, 4096> discard_, peek_;
  std::shared_ptr<Session> keep_;  // self while a response is pending
  bool writing_ = false, closed_ = false, keep_alive_ = true, pending_counted_ = false;
  bool ping_armed_ = false, watching_ = false, resume_idle_ = false;
  Clock::time_point last_write_ = Clock::now();
};

void ExchangeImpl::schedule_locked() {
  if (scheduled_) return;
  scheduled_ = true;
  std::weak_ptr<Session> w = session_;
  std::shared_ptr<ExchangeImpl> self = shared_from_this();
  post([w, self] {
    if (auto s = w.lock()) s->pump(self);
  });
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      // Out of descriptors (EMFILE, ENFILE) and the like: the open connections go on being
      // served; the waiting one is accepted when a descriptor frees (tried again shortly rather
      // than in a spin).
      auto t = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      t->async_wait([this, t](beast::error_code) { accept(); });
      return;
    }
    if (connections.load() >= max_connections) {
      beast::error_code ignore;
      socket.close(ignore);
    } else {
      ++connections;
      auto s = std::make_shared<Session>(*this, std::move(socket));
      sessions.insert_or_assign(s.get(), s);
      s->start();
    }
    accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->max_connections = std::max(1, impl_->opt.max_connections);
  rlimit fds{};
  if (::getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY) {
    const int64_t fit = static_cast<int64_t>(fds.rlim_cur) - kDescriptorMargin;
    impl_->max_connections =
        static_cast<int>(std::clamp<int64_t>(fit, 1, impl_->max_connections));
  }
  impl_->handler = std::move(handler);
  impl_->hub->ioc = &impl_->ioc;
  impl_->hub->response_headers = impl_->opt.response_headers;
  const std::string host = impl_->opt.host == "localhost" ? "127.0.0.1" : impl_->opt.host;
  beast::error_code ec;
  const net::ip::address addr = net::ip::make_address(host, ec);
  if (ec)
    throw InputError("--host: expected an IP address such as 127.0.0.1 or 0.0.0.0, found '" +
                     impl_->opt.host + "'");
  const tcp::endpoint ep(addr, impl_->opt.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw InputError("cannot listen on " + host + ":" +
                             std::to_string(impl_->opt.port) + ": " + ec.message() +
                             " (is another server on that port? choose one with --port)");
}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::add_response_header(std::string name, std::string value) {
  impl_->hub->response_headers.emplace_back(std::move(name), std::move(value));
}

void HttpServer::start() {
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

void HttpServer::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    std::vector<std::shared_ptr<Session>> all;
    for (auto& [p, w] : impl_->sessions)
      if (auto s = w.lock()) all.push_back(std::move(s));
    for (auto& s : all) s->close();
    impl_->ioc.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
  std::lock_guard<std::mutex> lock(impl_->hub->mutex);
  impl_->hub->ioc = nullptr;
}

int HttpServer::connections() const { return impl_->connections.load(); }
int HttpServer::max_connections() const { return impl_->max_connections; }
int HttpServer::pending_responses() const { return impl_->pending.load(); }

}  // namespace wick::server
