// One blocking connection to a Redis server (hiredis 0.14). The timeout bounds each send and
// each receive (SO_SNDTIMEO / SO_RCVTIMEO), not a whole reply: a large value trickled slowly can
// take longer. SIGPIPE from a dead server is blocked and consumed during a command (the command
// fails instead of the process ending). The only file that includes hiredis. Not thread-safe: one
// owner thread per connection.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "replicas/redis_url.h"

struct redisContext;

namespace wick::replicas {

// A reply reduced to what the tier needs: nil, a bulk string, an integer, a status, or an array.
struct RedisValue {
  enum class Type { kNil, kString, kInteger, kStatus, kArray } type = Type::kNil;
  std::string str;  // kString / kStatus
  long long integer = 0;
  std::vector<RedisValue> elements;  // kArray
};

class RedisConnection {
 public:
  // Connects, then AUTH and SELECT as the address says. Throws RedisError when the server cannot
  // be reached within `timeout`, refuses the password or the database.
  RedisConnection(const RedisAddress& address, std::chrono::milliseconds timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (binary-safe arguments) and reads its reply, waiting at most the timeout.
  // Throws RedisReplyError for an error reply, RedisError for an I/O error or a timeout (the
  // connection is then unusable: drop it).
  RedisValue command(const std::vector<std::string_view>& args);
  void set_timeout(std::chrono::milliseconds timeout);

 private:
  redisContext* ctx_ = nullptr;
};

// A failure talking to Redis (network, timeout, protocol); the connection is then unusable.
class RedisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Redis answered with an error reply (e.g. a command renamed away or denied by an ACL); the
// connection itself is still usable.
class RedisReplyError : public RedisError {
 public:
  using RedisError::RedisError;
};

}  // namespace wick::replicas
