// The recurrent state of an RWKV-7 model: everything the model remembers about the tokens it has
// consumed (docs/x070-math.md §2). For an RWKV-X hybrid (docs/rwkvx.md §4.2) it also holds the
// attention blocks' KV caches, which grow by one row per token. A State is a plain value: copying
// it takes a snapshot (KV caches included), assigning restores one. All zeros and empty caches is
// the start of a fresh context.
//
// Recurrent part (fp32, one contiguous buffer: data() / size()), per RWKV layer i in order:
//   att_shift [C]        ln1 output of the last token (time-mix token shift)
//   wkv       [H, N, N]  WKV matrix S[h, i_v, j_k] (row = value channel, column = key channel)
//   ffn_shift [C]        ln2 output of the last token (channel-mix token shift)
// then per attention block j (RWKV-X only, in block order):
//   attn_ffn_shift [C]   ln2 output of that block for the last token (its channel-mix shift)
// KV caches (RWKV-X only), per attention block j: k_cache(j), v_cache(j) [kv_length(), C] fp32,
// row p = key.weight · ln1(x_p) / value.weight · ln1(x_p) of the token at position p, before the
// head split (head h = channels 64h .. 64h+63). No positional information is stored.
// Bytes: L·(2C + H·N·N)·4 + N_a·C·4 fixed, plus N_a·2·C·4 per cached token.
//
// Thread-safety: a State is not synchronised; use one State per thread (copies are cheap to take).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wick {

class State {
 public:
  State() = default;
  // Zeros for a model with n_layer RWKV layers, width C, H heads of size N, and n_attn attention
  // blocks (RWKV-X; 0 for a plain RWKV-7 model). Usually obtained from Model::new_state(). Throws
  // InputError unless the sizes are positive (n_attn >= 0), H*N == C and the recurrent part is
  // below 2^40 floats.
  State(int n_layer, int n_embd, int n_head, int head_size, int n_attn = 0);

  int n_layer() const { return n_layer_; }
  int n_embd() const { return n_embd_; }
  int n_head() const { return n_head_; }
  int head_size() const { return head_size_; }
  int n_attn() const { return n_attn_; }
  bool empty() const { return data_.empty(); }

  // Per-layer pieces (layer in [0, n_layer); not bounds-checked).
  float* att_shift(int layer) { return data_.data() + layer * layer_stride() + 0; }
  float* wkv(int layer) { return data_.data() + layer * layer_stride() + n_embd_; }
  float* ffn_shift(int layer) {
    return data_.data() + layer * layer_stride() + n_embd_ + wkv_size();
  }
  const float* att_shift(int layer) const { return const_cast<State*>(this)->att_shift(layer); }
  const float* wkv(int layer) const { return const_cast<State*>(this)->wkv(layer); }
  const float* ffn_shift(int layer) const { return const_cast<State*>(this)->ffn_shift(layer); }

  // Attention block j in [0, n_attn) (not bounds-checked): its channel-mix token shift [C].
  float* attn_ffn_shift(int j) {
    return data_.data() + n_layer_ * layer_stride() + j * static_cast<size_t>(n_embd_);
  }
  const float* attn_ffn_shift(int j) const { return const_cast<State*>(this)->attn_ffn_shift(j); }

  // KV caches: rows cached per attention block (the tokens the state has absorbed; 0 without
  // attention blocks) and block j's K / V rows [kv_length(), C].
  int64_t kv_length() const { return kv_length_; }
  float* k_cache(int j) { return k_[j].data(); }
  float* v_cache(int j) { return v_[j].data(); }
  const float* k_cache(int j) const { return k_[j].data(); }
  const float* v_cache(int j) const { return v_[j].data(); }
  // Sets every cache to `length` rows: new rows are zero, a shorter length drops the last rows.
  // All-or-nothing: on a throw the state is unchanged. Throws InputError for a negative length,
  // one above 2^40 / C rows, or one > 0 on a state without attention blocks; std::bad_alloc when
  // memory runs out.
  void resize_kv(int64_t length);
  // Makes room for `length` rows without changing the state (so a later resize_kv up to it cannot
  // fail). Throws like resize_kv.
  void reserve_kv(int64_t length);

  // Derived data kept by the `moba` attention (not part of ==, not saved in state files): the mean
  // key [C] of each complete block of `kv_block_size()` cached rows, per attention block, for the
  // blocks summarised so far. The model extends it as blocks complete and rebuilds it for another
  // block size; resize_kv() to a shorter length and reset() drop it. Code that writes cached K
  // rows in place must call invalidate_block_means().
  std::vector<float>& kv_block_means(int j) { return block_means_[j]; }
  int64_t& kv_block_size() { return block_size_; }
  void invalidate_block_means() {
    for (auto& m : block_means_) m.clear();
  }

  // Floats in one layer's WKV matrix set (H*N*N), in one layer, and in the recurrent part.
  size_t wkv_size() const { return static_cast<size_t>(n_head_) * head_size_ * head_size_; }
  size_t layer_stride() const { return 2 * static_cast<size_t>(n_embd_) + wkv_size(); }
  size_t size() const { return data_.size(); }
  // Bytes of the recurrent part plus the KV caches' rows.
  size_t bytes() const {
    return (data_.size() + 2 * static_cast<size_t>(n_attn_) * kv_length_ * n_embd_) * sizeof(float);
  }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }

  // Back to all zeros and empty KV caches (a fresh context), keeping the geometry.
  void reset();

  // Same geometry, recurrent part and KV caches (bit for bit; the derived block means are ignored).
  bool operator==(const State& o) const;

 private:
  int n_layer_ = 0, n_embd_ = 0, n_head_ = 0, head_size_ = 0, n_attn_ = 0;
  std::vector<float> data_;
  int64_t kv_length_ = 0;
  std::vector<std::vector<float>> k_, v_;  // per attention block, kv_length_ * C floats
  std::vector<std::vector<float>> block_means_;
  int64_t block_size_ = 0;
};

}  // namespace wick
