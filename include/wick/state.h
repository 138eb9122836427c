// The recurrent state of an RWKV-7 model: everything the model remembers about the tokens it has
// consumed, in constant memory (docs/x070-math.md §2). A State is a plain value: copying it takes a
// snapshot, assigning restores one. All zeros is the start of a fresh context.
//
// Layout (fp32, one contiguous buffer), per layer i in order:
//   att_shift [C]        ln1 output of the last token (time-mix token shift)
//   wkv       [H, N, N]  WKV matrix S[h, i_v, j_k] (row = value channel, column = key channel)
//   ffn_shift [C]        ln2 output of the last token (channel-mix token shift)
// Bytes: L * (2C + H*N*N) * 4.
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
  // Zeros for a model with n_layer layers, width C, H heads of size N. Usually obtained from
  // Model::new_state(). Throws InputError unless all are positive, H*N == C and the state is
  // below 2^40 floats.
  State(int n_layer, int n_embd, int n_head, int head_size);

  int n_layer() const { return n_layer_; }
  int n_embd() const { return n_embd_; }
  int n_head() const { return n_head_; }
  int head_size() const { return head_size_; }
  bool empty() const { return data_.empty(); }

  // Per-layer pieces (layer in [0, n_layer); not bounds-checked).
  float* att_shift(int layer) { return data_.data() + layer * layer_stride() + 0; }
  float* wkv(int layer) { return data_.data() + layer * layer_stride() + n_embd_; }
  float* ffn_shift(int layer) { return data_.data() + layer * layer_stride() + n_embd_ + wkv_size(); }
  const float* att_shift(int layer) const { return const_cast<State*>(this)->att_shift(layer); }
  const float* wkv(int layer) const { return const_cast<State*>(this)->wkv(layer); }
  const float* ffn_shift(int layer) const { return const_cast<State*>(this)->ffn_shift(layer); }

  // Floats in one layer's WKV matrix set (H*N*N) and in the whole state.
  size_t wkv_size() const { return static_cast<size_t>(n_head_) * head_size_ * head_size_; }
  size_t layer_stride() const { return 2 * static_cast<size_t>(n_embd_) + wkv_size(); }
  size_t size() const { return data_.size(); }
  size_t bytes() const { return data_.size() * sizeof(float); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }

  // Back to all zeros (a fresh context), keeping the geometry.
  void reset();

  bool operator==(const State&) const = default;

 private:
  int n_layer_ = 0, n_embd_ = 0, n_head_ = 0, head_size_ = 0;
  std::vector<float> data_;
};

}  // namespace wick
