#include "generate/ngram_drafter.h"

#include <algorithm>
#include <cstdint>
#include <random>

namespace wick::gen {
namespace {

// SplitMix64's finaliser: a well-mixed 64-bit value of x.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t NgramDrafter::fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

int NgramDrafter::keys(size_t end, uint64_t (&out)[kMaxN + 1]) const {
  const int count = static_cast<int>(std::min<size_t>(kMaxN, end + 1));
  uint64_t h = seed_;
  for (int n = 1; n <= count; ++n) {
    h = mix(h ^ static_cast<uint32_t>(history_[end - static_cast<size_t>(n - 1)]));
    out[n] = mix(h + static_cast<uint64_t>(n));  // n is part of the key
  }
  return count;
}

void NgramDrafter::insert(uint64_t key, size_t end) {
  if (2 * (used_ + 1) > table_.size()) {
    std::vector<Slot> old(std::max<size_t>(256, 2 * table_.size()));
    old.swap(table_);
    used_ = 0;
    for (const Slot& s : old)
      if (s.end1) insert(s.key, s.end1 - 1);
  }
  const size_t mask = table_.size() - 1;
  for (size_t i = key & mask;; i = (i + 1) & mask) {
    Slot& s = table_[i];
    if (s.end1 == 0) {
      s = Slot{key, end + 1};
      ++used_;
      return;
    }
    if (s.key == key) {
      s.end1 = end + 1;  // the latest occurrence replaces the earlier one
      return;
    }
  }
}

size_t NgramDrafter::find(uint64_t key) const {
  if (table_.empty()) return SIZE_MAX;
  const size_t mask = table_.size() - 1;
  for (size_t i = key & mask;; i = (i + 1) & mask) {
    const Slot& s = table_[i];
    if (s.end1 == 0) return SIZE_MAX;
    if (s.key == key) return s.end1 - 1;
  }
}

bool NgramDrafter::same(size_t a_end, size_t b_end, int n) const {
  for (int i = 0; i < n; ++i)
    if (history_[a_end - i] != history_[b_end - i]) return false;
  return true;
}

void NgramDrafter::push(int32_t token) {
  history_.push_back(token);
  // The n-grams ending just before the new token now have a successor: they become lookups'
  // candidates (the latest occurrence replaces an earlier one).
  if (history_.size() < 2) return;
  const size_t end = history_.size() - 2;
  uint64_t key[kMaxN + 1];
  const int count = keys(end, key);
  for (int n = kMinN; n <= count; ++n) insert(key[n], end);
}

void NgramDrafter::push(std::span<const int32_t> tokens) {
  history_.reserve(history_.size() + tokens.size());
  for (int32_t t : tokens) push(t);
}

int NgramDrafter::draft(int k, std::vector<int32_t>& out, int min_n) const {
  out.clear();
  if (k <= 0 || history_.size() < static_cast<size_t>(kMinN) + 1) return 0;
  const size_t last = history_.size() - 1;
  uint64_t key[kMaxN + 1];
  const int count = std::min(keys(last, key), static_cast<int>(last));
  for (int n = count; n >= std::max(min_n, kMinN); --n) {
    const size_t at = find(key[n]);
    // (a key of another length colliding with this one could point before position n - 1)
    if (at == SIZE_MAX || at + 1 < static_cast<size_t>(n) || !same(at, last, n)) continue;
    const size_t from = at + 1;
    const size_t to = std::min(last + 1, from + static_cast<size_t>(k));
    out.assign(history_.begin() + static_cast<std::ptrdiff_t>(from),
               history_.begin() + static_cast<std::ptrdiff_t>(to));
    return n;
  }
  return 0;
}

}  // namespace wick::gen
