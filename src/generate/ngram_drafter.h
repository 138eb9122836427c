// The n-gram (prompt-lookup) drafter of speculative decoding (docs/serving.md §7; rwkv-quant's
// suffix lookup): over the history (prompt + generated tokens), for n from kMaxN down to kMinN,
// take the last n tokens, find their latest earlier occurrence, and propose the tokens that
// followed it (at most k of them, never past the end of the history).
//
// The lookup is indexed: one open-addressing table (linear probing, no allocation per entry) maps
// (n, the n-gram) to the end position of its latest occurrence that has a successor, updated as
// tokens are appended (kMaxN hash steps and kMaxN - 1 inserts per token), so a draft costs
// O(kMaxN + k) whatever the history's length. A hit is checked against the tokens themselves, so
// a hash collision never proposes a wrong continuation (at worst it hides an older occurrence).
// It runs on every decode pass of a speculating row, so it is kept to a few hundred nanoseconds.
//
// A value type; not synchronised (one drafter per generation row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace wick::gen {

class NgramDrafter {
 public:
  static constexpr int kMinN = 2;  // shortest suffix looked up
  static constexpr int kMaxN = 8;  // longest suffix looked up (tried first)

  // Appends tokens to the history (any ids; the drafter never checks them against a vocabulary).
  void push(int32_t token);
  void push(std::span<const int32_t> tokens);

  // The history appended so far.
  const std::vector<int32_t>& history() const { return history_; }

  // Replaces `out` with the draft: for the longest n in [min_n, kMaxN] whose last-n-token suffix
  // occurred earlier in the history, the at most `k` tokens that followed the latest such
  // occurrence (fewer when the history ends first). Empty when no such suffix recurs or k <= 0.
  // Returns the n used (0 when empty). `min_n` below kMinN counts as kMinN.
  int draft(int k, std::vector<int32_t>& out, int min_n = kMinN) const;

 private:
  // keys[n] = the key of history_[end - n + 1 .. end] for n in [1, min(kMaxN, end + 1)]; returns
  // that count.
  int keys(size_t end, uint64_t (&out)[kMaxN + 1]) const;
  bool same(size_t a_end, size_t b_end, int n) const;
  void insert(uint64_t key, size_t end);
  // The end position stored under `key`, or SIZE_MAX.
  size_t find(uint64_t key) const;
  std::vector<int32_t> history_;
  // Mixed into every key: random per drafter, so that no prompt can be crafted to make its
  // n-grams collide in one probe chain (results never depend on it, only the lookup's speed).
  uint64_t seed_ = fresh_seed();
  static uint64_t fresh_seed();
  // The table: key -> end + 1 of the latest occurrence followed by a token (0: empty slot);
  // a power-of-two size kept at most half full.
  struct Slot {
    uint64_t key = 0;
    uint64_t end1 = 0;
  };
  std::vector<Slot> table_;
  size_t used_ = 0;
};

}  // namespace wick::gen
