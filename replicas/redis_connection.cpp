#include "replicas/redis_connection.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <stdexcept>

namespace wick::replicas {
namespace {

timeval to_timeval(std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

// hiredis writes with write(): to a Redis that has just died that raises SIGPIPE, which would
// end the process. While a guard lives, SIGPIPE is blocked in this thread; one it raised is
// consumed before the old mask returns (write() then fails with EPIPE, a RedisError).
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec none{0, 0};
        sigtimedwait(&pipe_, nullptr, &none);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

RedisValue convert(const redisReply* r) {
  RedisValue v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::Type::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::Type::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::Type::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::Type::kArray;
      v.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(convert(r->element[i]));
      break;
    case REDIS_REPLY_ERROR:
      throw RedisReplyError("Redis answered an error: " + std::string(r->str, r->len));
    default:
      break;  // nil
  }
  return v;
}

}  // namespace

RedisConnection::RedisConnection(const RedisAddress& address, std::chrono::milliseconds timeout) {
  ctx_ = redisConnectWithTimeout(address.host.c_str(), address.port, to_timeval(timeout));
  if (!ctx_) throw RedisError("cannot allocate a Redis context");
  if (ctx_->err) {
    const std::string why = ctx_->errstr;
    redisFree(ctx_);
    ctx_ = nullptr;
    throw RedisError("cannot connect to Redis at " + address.display() + ": " + why);
  }
  try {
    set_timeout(timeout);
    redisEnableKeepAlive(ctx_);
    if (!address.user.empty())
      command({"AUTH", address.user, address.password});
    else if (!address.password.empty())
      command({"AUTH", address.password});
    if (address.db != 0) command({"SELECT", std::to_string(address.db)});
  } catch (...) {
    redisFree(ctx_);
    ctx_ = nullptr;
    throw;
  }
}

RedisConnection::~RedisConnection() {
  if (ctx_) redisFree(ctx_);
}

void RedisConnection::set_timeout(std::chrono::milliseconds timeout) {
  if (redisSetTimeout(ctx_, to_timeval(timeout)) != REDIS_OK)
    throw RedisError("cannot set the Redis timeout");
}

RedisValue RedisConnection::command(const std::vector<std::string_view>& args) {
  if (ctx_->err) throw RedisError(std::string("the Redis connection is broken: ") + ctx_->errstr);
  const SigpipeGuard no_sigpipe;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (!reply)
    throw RedisError(std::string("Redis I/O failed: ") +
                     (ctx_->err ? ctx_->errstr : "no reply"));
  std::unique_ptr<redisReply, void (*)(void*)> hold(reply, freeReplyObject);
  return convert(reply);
}

}  // namespace wick::replicas
