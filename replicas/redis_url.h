// Where a Redis server is: parsed from `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]` (wick serve
// --redis; USER for a Redis 6+ ACL user, else the default user).
#pragma once

#include <string>
#include <string_view>

namespace wick::replicas {

struct RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // empty: the default user (AUTH PASSWORD)
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECT db (0..15 on a default Redis)
  // "HOST:PORT/DB", without the password (for messages and logs).
  std::string display() const;
};

// Parses `url`. HOST may be a name, an IPv4 address or a bracketed IPv6 address; PORT defaults to
// 6379 and DB to 0. Throws InputError naming the part that is wrong (e.g. "rediss://" - no TLS:
// hiredis 0.14 has none - a port outside 1..65535, a DB that is not a number).
RedisAddress parse_redis_url(std::string_view url);

}  // namespace wick::replicas
