#include "generate/ngram_drafter.h"

#include <algorithm>

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

uint64_t NgramDrafter::hash(size_t end, int n) const {
  uint64_t h = static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) h = mix(h ^ static_cast<uint32_t>(history_[end - i]));
  return h;
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
  for (int n = kMinN; n <= kMaxN && static_cast<size_t>(n) <= end + 1; ++n)
    index_[n - kMinN][hash(end, n)] = end;
}

void NgramDrafter::push(std::span<const int32_t> tokens) {
  history_.reserve(history_.size() + tokens.size());
  for (int32_t t : tokens) push(t);
}

int NgramDrafter::draft(int k, std::vector<int32_t>& out) const {
  out.clear();
  if (k <= 0 || history_.size() < static_cast<size_t>(kMinN) + 1) return 0;
  const size_t last = history_.size() - 1;
  for (int n = std::min<int>(kMaxN, static_cast<int>(last)); n >= kMinN; --n) {
    const auto& map = index_[n - kMinN];
    const auto it = map.find(hash(last, n));
    if (it == map.end() || !same(it->second, last, n)) continue;
    const size_t from = it->second + 1;
    const size_t to = std::min(last + 1, from + static_cast<size_t>(k));
    out.assign(history_.begin() + static_cast<std::ptrdiff_t>(from),
               history_.begin() + static_cast<std::ptrdiff_t>(to));
    return n;
  }
  return 0;
}

}  // namespace wick::gen
