#include "replicas/redis_url.h"

#include <charconv>

#include "wick/errors.h"

namespace wick::replicas {
namespace {

int parse_int(std::string_view s, int lo, int hi, const std::string& what, std::string_view url) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
    throw InputError("--redis " + std::string(url) + ": the " + what + " should be a number in " +
                     std::to_string(lo) + ".." + std::to_string(hi) + ", found '" +
                     std::string(s) + "'");
  return v;
}

}  // namespace

std::string RedisAddress::display() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + std::to_string(db);
}

RedisAddress parse_redis_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  // Messages never repeat the password.
  std::string shown(url.substr(0, 200));
  if (const size_t at = shown.rfind('@'), from = shown.find("://");
      at != std::string::npos && from != std::string::npos && at > from)
    shown.replace(from + 3, at - from - 3, ":***");
  if (url.substr(0, kScheme.size()) != kScheme)
    throw InputError("--redis " + shown + ": expected redis://[:PASSWORD@]HOST:PORT[/DB]" +
                     (url.substr(0, 9) == "rediss://"
                          ? std::string(" (TLS is not available: keep Redis on loopback or a "
                                        "private network, with a password)")
                          : std::string()));
  std::string_view rest = url.substr(kScheme.size());
  RedisAddress a;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = auth.find(':');
    if (colon == std::string_view::npos)
      throw InputError("--redis " + shown + ": expected ':PASSWORD@' or 'USER:PASSWORD@' before the host");
    a.user = std::string(auth.substr(0, colon));
    a.password = std::string(auth.substr(colon + 1));
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    a.db = parse_int(rest.substr(slash + 1), 0, 1 << 20, "database number", shown);
    rest = rest.substr(0, slash);
  }
  std::string_view host = rest, port;
  if (!rest.empty() && rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos)
      throw InputError("--redis " + shown + ": an IPv6 host needs its closing ']'");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') throw InputError("--redis " + shown + ": expected ':PORT' after ']'");
      port = after.substr(1);
    }
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) throw InputError("--redis " + shown + ": the host is missing");
  a.host = std::string(host);
  if (!port.empty() || rest.find(':') != std::string_view::npos)
    a.port = parse_int(port, 1, 65535, "port", shown);
  return a;
}

}  // namespace wick::replicas
