// The n-gram (prompt-lookup) drafter of speculative decoding (docs/serving.md §7; rwkv-quant's
// suffix lookup): over the history (prompt + generated tokens), for n from kMaxN down to kMinN,
// take the last n tokens, find their latest earlier occurrence, and propose the tokens that
// followed it (at most k of them, never past the end of the history).
//
// The lookup is indexed: for every n an open hash map from the n-gram to the end position of its
// latest occurrence that has a successor, updated as tokens are appended (O(kMaxN) per token), so a
// draft costs O(kMaxN + k) whatever the history's length. A hit is checked against the tokens
// themselves, so a hash collision never proposes a wrong continuation.
//
// A value type; not synchronised (one drafter per generation row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
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

  // Replaces `out` with the draft: for the longest n in [kMinN, kMaxN] whose last-n-token suffix
  // occurred earlier in the history, the at most `k` tokens that followed the latest such
  // occurrence (fewer when the history ends first). Empty when no suffix recurs or k <= 0. Returns
  // the n used (0 when empty).
  int draft(int k, std::vector<int32_t>& out) const;

 private:
  // Hash of history_[end - n + 1 .. end].
  uint64_t hash(size_t end, int n) const;
  bool same(size_t a_end, size_t b_end, int n) const;
  std::vector<int32_t> history_;
  // index_[n - kMinN]: n-gram hash -> end position of its latest occurrence followed by a token.
  std::unordered_map<uint64_t, size_t> index_[kMaxN - kMinN + 1];
};

}  // namespace wick::gen
