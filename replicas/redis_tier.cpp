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
// is {index (1-based), value} or nil. Values longer than ARGV[1] bytes (more than any valid value
// could be) are skipped without being sent.
constexpr std::string_view kLongestScript =
    "local cap = tonumber(ARGV[1]) for i = #KEYS, 1, -1 do "
    "local n = redis.call('STRLEN', KEYS[i]) "
    "if n > 0 and n <= cap then return {i, redis.call('GET', KEYS[i])} end end return false";

// An error reply that says the lookup script cannot run here (renamed away, denied by an ACL):
// lookups then use MGET. Other error replies (OOM, BUSY, LOADING, WRONGTYPE) fail one lookup.
bool scripts_unavailable(const std::string& message) {
  return message.find("unknown command") != std::string::npos ||
         message.find("NOPERM") != std::string::npos ||
         message.find("NOSCRIPT") != std::string::npos;
}

// 1, 10, 100, ...: how often a repeated event is logged.
bool worth_logging(uint64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

// A lookup Redis answered with an error (or an unexpected reply): this lookup fails, the
// connection stays.
class LookupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace

void RedisTier::Link::failed() {
  backoff = backoff.count() == 0 ? kFirstBackoff : std::min(backoff * 2, kMaxBackoff);
  next_try = Clock::now() + backoff;
}

void RedisTier::Link::succeeded() {
  backoff = std::chrono::milliseconds{0};
  next_try = Clock::now();
}

RedisTier::RedisTier(Model model, RedisTierOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      key_base_(options_.prefix + ":" + model_.info().fingerprint + ":pfx:"),
      state_bytes_(model_.new_state().bytes()) {
  if (options_.queue_entries < 1)
    throw InputError("redis tier: the write queue must hold at least 1 entry");
  if (options_.ttl_s < 0) throw InputError("--redis-ttl: expected seconds >= 0 (0: no expiry)");
  if (options_.read_timeout.count() < 1 || options_.write_timeout.count() < 1)
    throw InputError("redis tier: timeouts must be at least 1 ms");
  // The first read connection is opened here (a replica starting next to a live Redis serves from
  // it at once); when Redis is not reachable yet, the I/O thread keeps trying.
  connect_read_if_due();
  io_ = std::thread([this] { io_loop(); });
}

RedisTier::~RedisTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
    dropped_ += queue_.size();
  }
  wake_.notify_all();
  if (io_.joinable()) io_.join();
}

void RedisTier::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

std::string RedisTier::key(std::string_view scope, std::span<const int32_t> tokens) const {
  return key_base_ + prefix_key(scope, tokens);
}

void RedisTier::read_down(const std::string& why) {
  read_failed_once_ = true;
  if (!read_down_logged_.exchange(true))
    log("redis tier (read): " + why +
        "; requests recompute what Redis would have served until it is back");
}

void RedisTier::read_failed(const std::string& why) {
  read_conn_.reset();  // read_mutex_ held by the caller
  read_connected_ = false;
  read_down(why);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    read_wanted_ = true;
    read_broke_ = true;  // the I/O thread backs off before reconnecting
  }
  wake_.notify_all();
}

std::shared_ptr<const CachedPrefix> RedisTier::fetch(std::string_view scope,
                                                     std::span<const int32_t> tokens,
                                                     std::span<const size_t> lengths) {
  try {
    const std::span<const size_t> cand = lengths;  // ascending, each <= tokens.size()
    if (cand.empty()) return nullptr;
    std::vector<std::string> keys = prefix_keys(scope, tokens, cand);  // checks the lengths
    for (std::string& k : keys) k = key_base_ + k;

    std::lock_guard<std::mutex> lock(read_mutex_);
    if (!read_conn_) {  // down (or not connected yet): the I/O thread is on it
      if (read_failed_once_) {
        ++errors_;
      } else {
        ++misses_;
      }
      {
        std::lock_guard<std::mutex> q(mutex_);
        read_wanted_ = true;
      }
      wake_.notify_all();
      return nullptr;
    }
    // No valid value is longer than this: the state, the logits, the ids (and for RWKV-X the KV
    // rows of the longest candidate), the scope and the file header's slack.
    const Geometry& g = model_.geometry();
    const uint64_t cap = state_bytes_ + uint64_t{4} * g.vocab + 8 * cand.back() +
                         uint64_t{8} * g.n_attn * g.n_embd * cand.back() + scope.size() +
                         (uint64_t{1} << 20);
    const std::string cap_text = std::to_string(cap);
    // The values of candidates [0, limit) in one round trip: index -> value (the longest present
    // one with the script; all of them with MGET).
    std::vector<std::pair<size_t, std::string>> found;
    auto ask = [&](size_t limit) {
      found.clear();
      if (!use_mget_) {
        const std::string n = std::to_string(limit);
        std::vector<std::string_view> args = {"EVAL", kLongestScript, n};
        for (size_t i = 0; i < limit; ++i) args.push_back(keys[i]);
        args.push_back(cap_text);
        try {
          RedisValue r = read_conn_->command(args);
          if (r.type == RedisValue::Type::kNil) return;
          if (r.type == RedisValue::Type::kArray && r.elements.size() == 2 &&
              r.elements[0].type == RedisValue::Type::kInteger && r.elements[0].integer >= 1 &&
              static_cast<size_t>(r.elements[0].integer) <= limit &&
              r.elements[1].type == RedisValue::Type::kString) {
            found.emplace_back(static_cast<size_t>(r.elements[0].integer) - 1,
                               std::move(r.elements[1].str));
            return;
          }
          throw LookupError("an unexpected reply to the lookup script");
        } catch (const RedisReplyError& e) {
          if (!scripts_unavailable(e.what())) throw LookupError(e.what());
          use_mget_ = true;  // scripts renamed away or denied: plain MGET from now on
          log(std::string("redis tier (read): ") + e.what() + "; looking up with MGET instead");
        }
      }
      std::vector<std::string_view> args = {"MGET"};
      for (size_t i = 0; i < limit; ++i) args.push_back(keys[i]);
      RedisValue r;
      try {
        r = read_conn_->command(args);
      } catch (const RedisReplyError& e) {
        throw LookupError(e.what());
      }
      if (r.type != RedisValue::Type::kArray || r.elements.size() != limit)
        throw LookupError("an unexpected reply to MGET");
      for (size_t i = limit; i-- > 0;)
        if (r.elements[i].type == RedisValue::Type::kString && r.elements[i].str.size() <= cap)
          found.emplace_back(i, std::move(r.elements[i].str));
    };

    bool refused = false;
    size_t limit = keys.size();  // candidates [0, limit) still to try
    while (limit > 0) {
      try {
        ask(limit);
      } catch (const LookupError& e) {  // Redis answered: the connection is fine
        ++errors_;
        const uint64_t n = ++refused_;
        if (worth_logging(n)) log(std::string("redis tier (read): ") + e.what() + "; recomputing");
        return nullptr;
      } catch (const std::exception& e) {
        ++errors_;
        read_failed(e.what());
        return nullptr;
      }
      if (found.empty()) break;
      for (auto& [i, value] : found) {  // longest first
        try {
          auto e = std::make_shared<CachedPrefix>(
              decode_cached_prefix(value, model_, scope, tokens.first(cand[i])));
          ++hits_;
          return e;
        } catch (const std::exception& e) {
          ++errors_;
          refused = true;
          const uint64_t n = ++refused_;
          if (worth_logging(n))
            log("redis tier (read): refused the value of " + keys[i] + ": " + e.what() +
                "; recomputing (" + std::to_string(n) + " refused so far)");
          limit = i;  // only the shorter candidates are left
        }
      }
      if (use_mget_) break;  // MGET already returned every shorter candidate
    }
    if (!refused) ++misses_;
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
  wake_.notify_all();
}

void RedisTier::connect_read_if_due() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!read_wanted_) return;
    if (read_broke_) {  // a lookup failed on a live connection: back off before the next one
      read_broke_ = false;
      read_link_.failed();
    }
  }
  if (Clock::now() < read_link_.next_try) return;
  std::unique_ptr<RedisConnection> conn;
  try {
    conn = std::make_unique<RedisConnection>(options_.address, options_.read_timeout);
    // A server that accepts connections but does not answer (stopped, stuck) must not count as up.
    conn->command({"PING"});
  } catch (const std::exception& e) {
    read_link_.failed();
    read_down(e.what());
    return;
  }
  read_link_.succeeded();
  {
    // Published together (read_mutex_ then mutex_, the order fetch() uses): a lookup failing
    // meanwhile cannot have its reconnect request overwritten.
    std::lock_guard<std::mutex> lock(read_mutex_);
    read_conn_ = std::move(conn);
    read_connected_ = true;
    std::lock_guard<std::mutex> q(mutex_);
    read_wanted_ = false;
    read_broke_ = false;
  }
  if (read_down_logged_.exchange(false))
    log("redis tier (read): connected again to " + options_.address.display());
}

void RedisTier::write_failed(const std::string& why) {
  write_conn_.reset();
  write_link_.failed();
  if (!write_down_logged_)
    log("redis tier (write): " + why + "; states are not shared until it is back");
  write_down_logged_ = true;
}

void RedisTier::write_one(const CachedPrefix& entry) {
  if (!write_conn_) {
    if (Clock::now() < write_link_.next_try) {
      ++dropped_;  // Redis is down: the entry is lost (requests recompute)
      return;
    }
    try {
      write_conn_ = std::make_unique<RedisConnection>(options_.address, options_.write_timeout);
      write_link_.succeeded();
      if (write_down_logged_)
        log("redis tier (write): connected again to " + options_.address.display());
      write_down_logged_ = false;
    } catch (const std::exception& e) {
      ++dropped_;
      write_failed(e.what());
      return;
    }
  }
  std::string value;
  try {
    value = encode_cached_prefix(entry, model_);
  } catch (const std::exception& e) {
    ++errors_;
    log(std::string("redis tier (write): ") + e.what());
    return;
  }
  const std::string k = key(entry.scope, entry.tokens);
  const std::string ttl = std::to_string(options_.ttl_s);
  try {
    if (options_.ttl_s > 0)
      write_conn_->command({"SET", k, value, "EX", ttl});
    else
      write_conn_->command({"SET", k, value});
    ++written_;
  } catch (const RedisReplyError& e) {
    ++errors_;  // e.g. OOM with maxmemory and noeviction: the connection is fine
    log(std::string("redis tier (write): ") + e.what());
  } catch (const std::exception& e) {
    ++errors_;
    write_failed(e.what());
  }
}

void RedisTier::io_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    auto ready = [&] { return quit_ || !queue_.empty() || (read_wanted_ && Clock::now() >= read_link_.next_try); };
    if (read_wanted_)
      wake_.wait_until(lock, std::max(read_link_.next_try, Clock::now() + std::chrono::milliseconds(1)), ready);
    else
      wake_.wait(lock, ready);
    if (quit_) return;
    std::shared_ptr<const CachedPrefix> entry;
    if (!queue_.empty()) {
      entry = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    lock.unlock();
    try {
      connect_read_if_due();
      if (entry) write_one(*entry);
    } catch (...) {
      ++errors_;
    }
    entry.reset();
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
