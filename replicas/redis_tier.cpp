#include "replicas/redis_tier.h"

#include <algorithm>

#include "replicas/redis_connection.h"
#include "wick/errors.h"
#include "wick/prefix_codec.h"

namespace wick::replicas {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kFirstBackoff{250}, kMaxBackoff{8000};

// The longest candidate that exists, in one round trip: KEYS ascend by prefix length; the reply
// is {index (1-based), value} or nil.
constexpr std::string_view kLongestScript =
    "for i = #KEYS, 1, -1 do local v = redis.call('GET', KEYS[i]) "
    "if v then return {i, v} end end return false";

}  // namespace

RedisTier::RedisTier(Model model, RedisTierOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      key_base_(options_.prefix + ":" + model_.info().fingerprint + ":pfx:") {
  if (options_.queue_entries < 1)
    throw InputError("redis tier: the write queue must hold at least 1 entry");
  if (options_.ttl_s < 0) throw InputError("--redis-ttl: expected seconds >= 0 (0: no expiry)");
  if (options_.read_timeout.count() < 1 || options_.write_timeout.count() < 1)
    throw InputError("redis tier: timeouts must be at least 1 ms");
  writer_ = std::thread([this] { writer_loop(); });
}

RedisTier::~RedisTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void RedisTier::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

std::string RedisTier::key(std::string_view scope, std::span<const int32_t> tokens) const {
  return key_base_ + prefix_key(scope, tokens);
}

bool RedisTier::ensure(Link& link, std::chrono::milliseconds timeout, const char* who) {
  if (link.conn) return true;
  const auto now = Clock::now();
  if (now < link.next_try) return false;
  try {
    link.conn = std::make_unique<RedisConnection>(options_.address, timeout);
  } catch (const std::exception& e) {
    broken(link, e.what(), who);
    return false;
  }
  if (link.down_logged) log(std::string("redis tier (") + who + "): connected again to " +
                            options_.address.display());
  link.down_logged = false;
  link.backoff = std::chrono::milliseconds{0};
  return true;
}

void RedisTier::broken(Link& link, const std::string& why, const char* who) {
  link.conn.reset();
  link.backoff = link.backoff.count() == 0 ? kFirstBackoff : std::min(link.backoff * 2, kMaxBackoff);
  link.next_try = Clock::now() + link.backoff;
  ++errors_;
  if (!link.down_logged) {
    log(std::string("redis tier (") + who + "): " + why +
        "; requests recompute what Redis would have served; retrying with backoff");
    link.down_logged = true;
  }
}

std::shared_ptr<const CachedPrefix> RedisTier::fetch(std::string_view scope,
                                                     std::span<const int32_t> tokens,
                                                     std::span<const size_t> lengths) {
  try {
    std::vector<size_t> cand;
    for (size_t n : lengths)
      if (n >= 1 && n <= tokens.size() && (cand.empty() || n > cand.back())) cand.push_back(n);
    if (cand.empty()) return nullptr;
    std::vector<std::string> keys = prefix_keys(scope, tokens, cand);
    for (std::string& k : keys) k = key_base_ + k;

    std::lock_guard<std::mutex> lock(read_mutex_);
    bool had_error = false;
    size_t limit = keys.size();  // candidates [0, limit) still to try
    while (limit > 0) {
      if (!ensure(read_, options_.read_timeout, "read")) {
        read_connected_ = false;
        ++errors_;
        return nullptr;
      }
      read_connected_ = true;
      RedisValue reply;
      try {
        const std::string n = std::to_string(limit);
        std::vector<std::string_view> args = {"EVAL", kLongestScript, n};
        for (size_t i = 0; i < limit; ++i) args.push_back(keys[i]);
        reply = read_.conn->command(args);
      } catch (const std::exception& e) {
        broken(read_, e.what(), "read");
        read_connected_ = false;
        return nullptr;
      }
      if (reply.type == RedisValue::Type::kNil) break;
      if (reply.type != RedisValue::Type::kArray || reply.elements.size() != 2 ||
          reply.elements[0].type != RedisValue::Type::kInteger ||
          reply.elements[0].integer < 1 || static_cast<size_t>(reply.elements[0].integer) > limit ||
          reply.elements[1].type != RedisValue::Type::kString) {
        ++errors_;
        log("redis tier (read): an unexpected reply to the lookup script; treated as a miss");
        return nullptr;
      }
      const size_t i = static_cast<size_t>(reply.elements[0].integer) - 1;
      try {
        auto e = std::make_shared<CachedPrefix>(decode_cached_prefix(
            reply.elements[1].str, model_, scope, tokens.first(cand[i])));
        ++hits_;
        return e;
      } catch (const std::exception& e) {
        ++errors_;
        had_error = true;
        log("redis tier (read): refused the value of " + keys[i] + ": " + e.what() +
            "; trying shorter prefixes, then recomputing");
        limit = i;  // only the shorter candidates are left
      }
    }
    if (!had_error) ++misses_;
    return nullptr;
  } catch (const std::exception& e) {
    ++errors_;
    log(std::string("redis tier (read): ") + e.what());
    return nullptr;
  } catch (...) {
    ++errors_;
    return nullptr;
  }
}

void RedisTier::store(std::shared_ptr<const CachedPrefix> entry) {
  if (!entry || entry->tokens.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (quit_) return;
    if (queue_.size() >= options_.queue_entries) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(entry));
  }
  wake_.notify_one();
}

void RedisTier::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return quit_ || !queue_.empty(); });
    if (quit_) return;
    std::shared_ptr<const CachedPrefix> entry = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    try {
      if (ensure(write_, options_.write_timeout, "write")) {
        const std::string value = encode_cached_prefix(*entry, model_);
        const std::string k = key(entry->scope, entry->tokens);
        const std::string ttl = std::to_string(options_.ttl_s);
        try {
          if (options_.ttl_s > 0)
            write_.conn->command({"SET", k, value, "EX", ttl});
          else
            write_.conn->command({"SET", k, value});
          ++written_;
        } catch (const std::exception& e) {
          broken(write_, e.what(), "write");
        }
      } else {
        ++dropped_;  // Redis is down: the entry is lost (requests recompute)
      }
    } catch (const std::exception& e) {
      ++errors_;
      log(std::string("redis tier (write): ") + e.what());
    }
    lock.lock();
    writing_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

bool RedisTier::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return queue_.empty() && !writing_; });
}

PrefixCacheTierStats RedisTier::stats() const {
  PrefixCacheTierStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.errors = errors_;
  s.written = written_;
  s.dropped = dropped_;
  s.connected = read_connected_;
  std::lock_guard<std::mutex> lock(mutex_);
  s.write_queue = queue_.size() + (writing_ ? 1 : 0);
  return s;
}

}  // namespace wick::replicas
