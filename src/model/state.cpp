#include "wick/state.h"

#include <algorithm>
#include <string>

#include "model/state_geometry.h"
#include "wick/errors.h"

namespace wick {

std::string geometry_text(const StateGeometry& g) {
  std::string s = "L=" + std::to_string(g.n_layer) + ", C=" + std::to_string(g.n_embd) +
                  ", H=" + std::to_string(g.n_head) + ", N=" + std::to_string(g.head_size);
  if (g.n_attn != 0) s += ", attention blocks=" + std::to_string(g.n_attn);
  return s;
}

std::string state_mismatch_message(const StateGeometry& found, const Geometry& model,
                                   std::string_view subject) {
  return std::string(subject) + " has geometry (" + geometry_text(found) + ") but the model has (" +
         geometry_text(StateGeometry::of(model)) +
         "); a state only runs on the model that made it: create it with Model::new_state() of "
         "this model, or load a state file saved by it";
}

void throw_state_mismatch(const StateGeometry& found, const Geometry& model,
                          std::string_view subject) {
  throw InputError(state_mismatch_message(found, model, subject));
}

State::State(int n_layer, int n_embd, int n_head, int head_size, int n_attn)
    : n_layer_(n_layer), n_embd_(n_embd), n_head_(n_head), head_size_(head_size), n_attn_(n_attn) {
  if (n_layer <= 0 || n_embd <= 0 || n_head <= 0 || head_size <= 0 || n_attn < 0 ||
      static_cast<int64_t>(n_head) * head_size != n_embd ||
      static_cast<double>(n_layer) * (2.0 * n_embd + static_cast<double>(n_embd) * head_size) +
              static_cast<double>(n_attn) * n_embd >
          static_cast<double>(1ull << 40)) {
    throw InputError("invalid state geometry (" +
                     geometry_text({n_layer, n_embd, n_head, head_size, n_attn}) +
                     "): expected positive sizes with H*N == C (use Model::new_state())");
  }
  data_.assign(static_cast<size_t>(n_layer) * layer_stride() + static_cast<size_t>(n_attn) * n_embd,
               0.f);
  k_.resize(n_attn);
  v_.resize(n_attn);
  block_means_.resize(n_attn);
}

namespace {

void check_kv_length(int64_t length, int n_attn, int n_embd) {
  const int64_t max_rows = n_embd > 0 ? (int64_t{1} << 40) / n_embd : 0;
  if (length < 0 || (n_attn == 0 && length > 0) || length > max_rows) {
    throw InputError("cannot give a KV cache of " + std::to_string(length) +
                     " rows to a state with " + std::to_string(n_attn) +
                     " attention blocks of width " + std::to_string(n_embd) +
                     ": expected a length in [0, " + std::to_string(max_rows) +
                     "], and 0 without attention blocks");
  }
}

}  // namespace

void State::reserve_kv(int64_t length) {
  check_kv_length(length, n_attn_, n_embd_);
  // Geometric growth: appending one token per step must not copy the whole cache each time.
  const size_t n = static_cast<size_t>(length) * n_embd_;
  for (int j = 0; j < n_attn_; ++j) {
    for (std::vector<float>* cache : {&k_[j], &v_[j]}) {
      if (n > cache->capacity())
        cache->reserve(std::max(n, cache->capacity() + cache->capacity() / 2));
    }
  }
}

void State::resize_kv(int64_t length) {
  reserve_kv(length);  // may throw; nothing has changed yet
  const size_t n = static_cast<size_t>(length) * n_embd_;
  for (int j = 0; j < n_attn_; ++j) {  // cannot throw: the capacity is there
    k_[j].resize(n, 0.f);
    v_[j].resize(n, 0.f);
  }
  if (length < kv_length_) invalidate_block_means();  // summaries of dropped rows are stale
  kv_length_ = length;
}

void State::reset() {
  std::fill(data_.begin(), data_.end(), 0.f);
  for (int j = 0; j < n_attn_; ++j) {
    k_[j].clear();
    v_[j].clear();
    block_means_[j].clear();
  }
  kv_length_ = 0;
}

bool State::operator==(const State& o) const {
  return n_layer_ == o.n_layer_ && n_embd_ == o.n_embd_ && n_head_ == o.n_head_ &&
         head_size_ == o.head_size_ && n_attn_ == o.n_attn_ && kv_length_ == o.kv_length_ &&
         data_ == o.data_ && k_ == o.k_ && v_ == o.v_;
}

}  // namespace wick
