#include "wick/state.h"

#include <algorithm>

namespace wick {

State::State(int n_layer, int n_embd, int n_head, int head_size)
    : n_layer_(n_layer), n_embd_(n_embd), n_head_(n_head), head_size_(head_size) {
  data_.assign(static_cast<size_t>(n_layer) * layer_stride(), 0.f);
}

void State::reset() { std::fill(data_.begin(), data_.end(), 0.f); }

}  // namespace wick
