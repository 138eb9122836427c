// A throwaway redis-server on a free loopback port for the replica tests (no persistence),
// started and stopped by the test. Tests skip when redis-server is not installed.
#pragma once

#include <sys/types.h>

#include <string>

namespace wick::test {

// True when `redis-server` is on PATH.
bool have_redis_server();

class RedisServer {
 public:
  // Starts redis-server on `port` (0: a free one) and waits until it answers PING (10 s at most;
  // throws std::runtime_error otherwise). `extra` is appended to its command line.
  explicit RedisServer(int port = 0, const std::string& extra = "");
  ~RedisServer();  // SIGKILL if still running
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  void kill_now();  // SIGKILL and reap (a dead Redis)

 private:
  int port_ = 0;
  pid_t pid_ = -1;
};

// A loopback TCP port nobody listens on right now.
int free_port();

}  // namespace wick::test
