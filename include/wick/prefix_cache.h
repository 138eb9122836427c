// Prefix state cache (docs: README "Serving engine"): the State after a token prefix, with the
// logits of its last position, so a request whose tokens start with a cached prefix continues
// from it and prefills only the rest - and a prompt that is cached whole needs no pass before its
// first token. An RWKV state is fixed-size, so one entry costs one state whatever the prefix
// length.
//
// Keys. An entry belongs to a *scope*: a string that names everything besides the tokens that
// changes the numbers (weights fingerprint, precision, weight quantisation, RWKV-X attention
// options, adapters, the initial state, the state format version; Engine builds it with
// cache_scope()). Within a scope an entry is keyed by SHA-256(scope, 0x00, the token ids as int32
// little-endian) - the form a shared second tier (Redis) uses across processes - with the prefix
// length and the ids stored beside it and compared on every hit, so a hash collision can never
// return a wrong state.
//
// Bounds: the local tier holds at most `max_bytes` (state + KV caches + logits + ids of every
// entry) and evicts the least recently used entries to stay below it; an entry larger than the
// whole budget is not stored. max_bytes 0 disables it.
//
// Thread-safety: every member function may be called from any thread (one internal mutex).
// Entries are immutable and shared: a lookup result stays valid after the entry is evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "wick/state.h"

namespace wick {

// One cached prefix: the ids it absorbed, the state after them and the logits [V] of the last id.
struct CachedPrefix {
  std::string scope;
  std::vector<int32_t> tokens;
  State state;
  std::vector<float> logits;
  // Bytes this entry accounts for in a cache budget.
  size_t bytes() const;
};

// The key of `tokens[0, n)` in `scope`: 64 lowercase hex digits of SHA-256(scope, 0x00, ids).
std::string prefix_key(std::string_view scope, std::span<const int32_t> tokens);
// prefix_key(scope, tokens[0, n)) for each n in `lengths` (ascending, each <= tokens.size()),
// in one pass over the ids. Throws InputError for lengths that descend or pass tokens.size().
std::vector<std::string> prefix_keys(std::string_view scope, std::span<const int32_t> tokens,
                                     std::span<const size_t> lengths);

// What a second tier reports about itself (all zero for a tier that keeps no counts).
struct PrefixCacheTierStats {
  uint64_t hits = 0;       // fetches answered with a valid entry
  uint64_t misses = 0;     // fetches that found no valid entry and hit no error
  uint64_t errors = 0;     // bad values refused, failed reads and writes, unreachable store
  uint64_t written = 0;    // entries written
  uint64_t dropped = 0;    // entries not written (queue full, store unreachable)
  size_t write_queue = 0;  // entries waiting to be written now
  bool connected = false;  // the read side reached the store at its last attempt
};

// A second cache tier behind the local one (the replicas' shared Redis tier plugs in here).
// Implementations validate what they read like any untrusted file; neither call may throw.
class PrefixCacheTier {
 public:
  virtual ~PrefixCacheTier() = default;
  // The longest entry of `scope` whose ids are tokens[0, n) for some n in `lengths` (ascending,
  // each <= tokens.size()), or null. Called on the engine thread at admission, which blocks every
  // running stream meanwhile: keep it to one round trip with a short timeout.
  virtual std::shared_ptr<const CachedPrefix> fetch(std::string_view scope,
                                                    std::span<const int32_t> tokens,
                                                    std::span<const size_t> lengths) = 0;
  // Offers an entry the local tier stored. Must not block (queue it; drop it when full).
  virtual void store(std::shared_ptr<const CachedPrefix> entry) = 0;
  // Counters for monitoring; thread-safe.
  virtual PrefixCacheTierStats stats() const { return {}; }
};

struct PrefixCacheStats {
  uint64_t lookups = 0;        // lookup() calls
  uint64_t hits = 0;           // of which found a prefix
  uint64_t hit_tokens = 0;     // tokens served by those hits
  uint64_t lookup_tokens = 0;  // tokens asked for in all lookups
  uint64_t inserts = 0;        // entries stored
  uint64_t evictions = 0;      // entries dropped to stay within max_bytes
  size_t entries = 0;          // entries held now
  size_t bytes = 0;            // bytes held now
  size_t max_bytes = 0;
};

// The local tier: an LRU map bounded in bytes.
class PrefixCache {
 public:
  explicit PrefixCache(size_t max_bytes);

  // The longest stored entry of `scope` whose ids are a prefix of `tokens` (of any length
  // 1..tokens.size()), marked most recently used; null when none.
  std::shared_ptr<const CachedPrefix> lookup(std::string_view scope,
                                             std::span<const int32_t> tokens);

  // Stores the state after `tokens` (with the logits of its last position), replacing an entry
  // of the same scope and ids; evicts the least recently used entries until the budget holds.
  // Returns the entry stored, or null when it does not fit the budget (or the cache is disabled).
  // Throws InputError for empty tokens or empty logits.
  std::shared_ptr<const CachedPrefix> insert(std::string_view scope,
                                             std::span<const int32_t> tokens, const State& state,
                                             std::span<const float> logits);

  // Puts an entry obtained elsewhere (a second tier) into this tier, as insert() does.
  void adopt(std::shared_ptr<const CachedPrefix> entry);

  PrefixCacheStats stats() const;
  size_t max_bytes() const { return max_bytes_; }
  void clear();

 private:
  struct Slot {
    std::shared_ptr<const CachedPrefix> entry;
    std::list<std::string>::iterator lru;
  };
  void put_locked(const std::string& key, std::shared_ptr<const CachedPrefix> entry);
  void erase_locked(std::unordered_map<std::string, Slot>::iterator it);

  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;  // key -> entry
  std::list<std::string> lru_;                   // most recently used first
  std::map<std::string, std::map<size_t, size_t>, std::less<>> lengths_;  // scope -> len -> count
  PrefixCacheStats stats_;
};

}  // namespace wick
