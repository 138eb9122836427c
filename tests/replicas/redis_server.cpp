#include "replicas/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

namespace wick::test {

bool have_redis_server() { return std::system("command -v redis-server >/dev/null 2>&1") == 0; }

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("free_port: cannot bind a loopback socket");
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

namespace {

bool answers_ping(int port) {
  const std::string cmd = "redis-cli -p " + std::to_string(port) + " ping 2>/dev/null | grep -q PONG";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

RedisServer::RedisServer(int port, const std::string& extra) : port_(port ? port : free_port()) {
  const std::string cmd = "exec redis-server --port " + std::to_string(port_) +
                          " --bind 127.0.0.1 --save '' --appendonly no --loglevel warning " +
                          extra + " >/dev/null 2>&1";
  pid_ = fork();
  if (pid_ == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid_ < 0) throw std::runtime_error("RedisServer: fork failed");
  // Ours must be the one answering: a Redis of another test could hold the port (ctest -j).
  for (int i = 0; i < 200; ++i) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start on port " + std::to_string(port_) +
                               " (port taken?)");
    }
    if (answers_ping(port_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill_now();
  throw std::runtime_error("redis-server did not answer on port " + std::to_string(port_));
}

void RedisServer::kill_now() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
}

RedisServer::~RedisServer() { kill_now(); }

}  // namespace wick::test
