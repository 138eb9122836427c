#include "wick/prefix_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/sha256.h"
#include "wick/errors.h"

namespace wick {
namespace {

// Per-entry bookkeeping counted against the budget besides the arrays (maps, list, strings).
constexpr size_t kEntryOverhead = 256;

base::Sha256 scope_hasher(std::string_view scope) {
  base::Sha256 h;
  h.update(scope);
  const char zero = 0;
  h.update(&zero, 1);
  return h;
}

// Ids as int32 little-endian bytes (x86-64 is little-endian; the static_assert keeps it honest).
void hash_ids(base::Sha256& h, std::span<const int32_t> ids) {
  static_assert(std::endian::native == std::endian::little, "prefix keys assume little-endian ids");
  if (!ids.empty()) h.update(ids.data(), ids.size() * sizeof(int32_t));
}

}  // namespace

size_t CachedPrefix::bytes() const {
  return state.bytes() + logits.size() * sizeof(float) + tokens.size() * sizeof(int32_t) +
         scope.size() + kEntryOverhead;
}

std::string prefix_key(std::string_view scope, std::span<const int32_t> tokens) {
  base::Sha256 h = scope_hasher(scope);
  hash_ids(h, tokens);
  return h.hex_digest();
}

std::vector<std::string> prefix_keys(std::string_view scope, std::span<const int32_t> tokens,
                                     std::span<const size_t> lengths) {
  std::vector<std::string> keys;
  keys.reserve(lengths.size());
  base::Sha256 h = scope_hasher(scope);
  size_t done = 0;
  for (size_t len : lengths) {
    if (len < done || len > tokens.size())
      throw InputError("prefix_keys: lengths must ascend and fit the " +
                       std::to_string(tokens.size()) + " ids; found " + std::to_string(len) +
                       " after " + std::to_string(done));
    hash_ids(h, tokens.subspan(done, len - done));
    done = len;
    base::Sha256 copy = h;
    keys.push_back(copy.hex_digest());
  }
  return keys;
}

PrefixCache::PrefixCache(size_t max_bytes) : max_bytes_(max_bytes) {
  stats_.max_bytes = max_bytes;
}

std::shared_ptr<const CachedPrefix> PrefixCache::lookup(std::string_view scope,
                                                        std::span<const int32_t> tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.lookups;
  stats_.lookup_tokens += tokens.size();
  auto lens = lengths_.find(scope);
  if (lens == lengths_.end() || tokens.empty()) return nullptr;
  // Digests of the stored lengths that fit, computed in one pass over the ids.
  std::vector<size_t> fit;
  for (const auto& [len, count] : lens->second) {
    if (len > tokens.size()) break;
    fit.push_back(len);
  }
  const std::vector<std::string> digests = prefix_keys(scope, tokens, fit);
  std::vector<std::pair<size_t, std::string>> keys;
  for (size_t i = 0; i < fit.size(); ++i) keys.emplace_back(fit[i], digests[i]);
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) {
    auto it = slots_.find(k->second);
    if (it == slots_.end()) continue;
    const CachedPrefix& e = *it->second.entry;
    // The ids themselves decide: a digest match alone is never trusted.
    if (e.scope != scope || e.tokens.size() != k->first ||
        !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin()))
      continue;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    ++stats_.hits;
    stats_.hit_tokens += k->first;
    return it->second.entry;
  }
  return nullptr;
}

std::shared_ptr<const CachedPrefix> PrefixCache::insert(std::string_view scope,
                                                        std::span<const int32_t> tokens,
                                                        const State& state,
                                                        std::span<const float> logits) {
  if (tokens.empty()) throw InputError("prefix cache: an entry needs at least one token id");
  if (logits.empty())
    throw InputError("prefix cache: an entry needs the logits of its last position");
  if (max_bytes_ == 0) return nullptr;
  // Cheap size check before copying a state that could never fit.
  if (state.bytes() + logits.size() * sizeof(float) + tokens.size() * sizeof(int32_t) > max_bytes_)
    return nullptr;
  auto e = std::make_shared<CachedPrefix>();
  e->scope = std::string(scope);
  e->tokens.assign(tokens.begin(), tokens.end());
  e->state = state;
  e->logits.assign(logits.begin(), logits.end());
  if (e->bytes() > max_bytes_) return nullptr;
  const std::string key = prefix_key(scope, tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  put_locked(key, e);
  return e;
}

void PrefixCache::adopt(std::shared_ptr<const CachedPrefix> entry) {
  if (!entry || entry->tokens.empty() || entry->logits.empty() || max_bytes_ == 0 ||
      entry->bytes() > max_bytes_)
    return;
  const std::string key = prefix_key(entry->scope, entry->tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  put_locked(key, std::move(entry));
}

void PrefixCache::put_locked(const std::string& key, std::shared_ptr<const CachedPrefix> entry) {
  if (auto old = slots_.find(key); old != slots_.end()) erase_locked(old);
  const size_t need = entry->bytes();
  while (!lru_.empty() && stats_.bytes + need > max_bytes_) {
    erase_locked(slots_.find(lru_.back()));
    ++stats_.evictions;
  }
  lru_.push_front(key);
  ++lengths_[entry->scope][entry->tokens.size()];
  stats_.bytes += need;
  slots_.emplace(key, Slot{std::move(entry), lru_.begin()});
  stats_.entries = slots_.size();
  ++stats_.inserts;
}

void PrefixCache::erase_locked(std::unordered_map<std::string, Slot>::iterator it) {
  const CachedPrefix& e = *it->second.entry;
  auto lens = lengths_.find(e.scope);
  if (lens != lengths_.end()) {
    auto n = lens->second.find(e.tokens.size());
    if (n != lens->second.end() && --n->second == 0) lens->second.erase(n);
    if (lens->second.empty()) lengths_.erase(lens);
  }
  stats_.bytes -= e.bytes();
  lru_.erase(it->second.lru);
  slots_.erase(it);
  stats_.entries = slots_.size();
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PrefixCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.clear();
  lru_.clear();
  lengths_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
}

}  // namespace wick
