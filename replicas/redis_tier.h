// The replicas' shared second tier of the prefix cache (README "Scaling out"): a PrefixCacheTier
// on Redis, so any replica continues a conversation another one served without recomputing it.
//
// Keys "{prefix}:{fingerprint}:pfx:{prefix_key(scope, ids)}" (wick/prefix_cache.h); values
// encode_cached_prefix() (wick/prefix_codec.h): a wick state file plus the ids it absorbed and
// the logits of its last position, each validated on read like any untrusted file, so replicas
// started with other settings (the scope) or another model never use each other's entries.
//
// Writes: store() queues the entry (bounded; full -> dropped and counted) and returns at once; a
// dedicated I/O thread encodes it and SETs it (with EX ttl when one is set), normally within
// milliseconds. Reads: fetch() asks for the longest existing candidate in one round trip (a
// server-side script over the candidate keys, longest first; MGET where scripts are refused)
// with a short timeout; a corrupt or foreign value is counted as an error and the next shorter
// candidate is tried.
//
// Failures never fail a request: an unreachable Redis, a timeout or a bad value is a miss (the
// engine recomputes), logged once per outage through `log` and counted in stats(). The I/O
// thread does all connecting: it keeps one connection for its writes and opens the one fetch()
// uses (answering PING before it is used), reconnecting each with exponential backoff (250 ms
// doubling to 8 s, reset by a working connection). fetch() never connects: while its connection
// is down it returns at once, so a dead or unreachable Redis never holds the engine thread; a
// Redis that stops answering holds it for read_timeout once, then not until the backoff passes.
// read_timeout bounds each send and receive, not a whole transfer. Values longer than any valid
// value could be are skipped by the lookup script without being sent. Where scripts are renamed
// away or denied (ACL), lookups use MGET, which transfers every candidate present.
//
// Thread-safety: fetch(), store() and stats() may be called from any thread; fetch() calls are
// serialised (one read connection). No TLS (hiredis 0.14 has none): keep Redis on loopback or a
// private network, with a password.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "replicas/redis_url.h"
#include "wick/model.h"
#include "wick/prefix_cache.h"

namespace wick::replicas {

class RedisConnection;

struct RedisTierOptions {
  RedisAddress address;
  std::string prefix = "wick";  // key prefix (several deployments can share one Redis)
  int ttl_s = 0;                // EX on every SET; 0: none (size Redis with maxmemory + LRU)
  std::chrono::milliseconds read_timeout{250};    // connect and reply timeout of fetch()
  std::chrono::milliseconds write_timeout{2000};  // connect and reply timeout of the writer
  size_t queue_entries = 64;  // entries waiting for the writer; more are dropped (>= 1)
  std::function<void(const std::string&)> log;  // one line per event worth logging; may be empty
};

class RedisTier : public PrefixCacheTier {
 public:
  // `model` (a copy shares its weights) decodes and validates values. Tries to connect at once
  // (waiting at most read_timeout); Redis need not be up: the I/O thread keeps trying. Throws
  // InputError for bad options.
  RedisTier(Model model, RedisTierOptions options);
  // Stops the I/O thread; entries still queued are dropped (counted in stats().dropped). Call
  // flush() first to write them.
  ~RedisTier() override;

  std::shared_ptr<const CachedPrefix> fetch(std::string_view scope,
                                            std::span<const int32_t> tokens,
                                            std::span<const size_t> lengths) override;
  void store(std::shared_ptr<const CachedPrefix> entry) override;

  PrefixCacheTierStats stats() const override;
  // The Redis key of `tokens` in `scope`.
  std::string key(std::string_view scope, std::span<const int32_t> tokens) const;
  // Waits until the write queue is empty and the writer idle, or `timeout` passes; true when
  // drained (tests and orderly shutdown).
  bool flush(std::chrono::milliseconds timeout);

 private:
  // Reconnect bookkeeping of one connection (I/O thread only).
  struct Link {
    std::chrono::steady_clock::time_point next_try{};
    std::chrono::milliseconds backoff{0};
    void failed();     // backoff grows, next_try set
    void succeeded();  // backoff reset
  };
  void io_loop();
  void connect_read_if_due();
  void write_one(const CachedPrefix& entry);
  void write_failed(const std::string& why);  // drop the write connection, back off, log once
  void read_down(const std::string& why);    // the read side is down: counted once, logged once
  void read_failed(const std::string& why);  // fetch(): drop the read connection, tell the I/O thread
  void log(const std::string& line) const;

  const Model model_;
  const RedisTierOptions options_;
  const std::string key_base_;  // "{prefix}:{fingerprint}:pfx:"
  const uint64_t state_bytes_;   // bytes of one State without KV rows (bounds a value's size)

  std::mutex read_mutex_;  // guards read_conn_ and use_mget_
  std::unique_ptr<RedisConnection> read_conn_;
  bool use_mget_ = false;  // the server refused the lookup script

  mutable std::mutex mutex_;  // guards the queue and the flags below
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<const CachedPrefix>> queue_;
  bool writing_ = false;
  bool quit_ = false;
  bool read_wanted_ = true;  // fetch() has no connection: the I/O thread should open one
  bool read_broke_ = false;  // ... because a lookup failed on it (back off first)

  // I/O thread only.
  std::unique_ptr<RedisConnection> write_conn_;
  Link read_link_, write_link_;
  bool write_down_logged_ = false;

  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, written_{0}, dropped_{0}, refused_{0};
  std::atomic<bool> read_connected_{false};
  std::atomic<bool> read_failed_once_{false};  // a read connection failed or broke at least once
  std::atomic<bool> read_down_logged_{false};
  std::thread io_;
};

}  // namespace wick::replicas
