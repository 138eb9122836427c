#include "wick/state.h"

#include <algorithm>
#include <string>

#include "wick/errors.h"

namespace wick {

State::State(int n_layer, int n_embd, int n_head, int head_size)
    : n_layer_(n_layer), n_embd_(n_embd), n_head_(n_head), head_size_(head_size) {
  if (n_layer <= 0 || n_embd <= 0 || n_head <= 0 || head_size <= 0 ||
      static_cast<int64_t>(n_head) * head_size != n_embd ||
      static_cast<double>(n_layer) * (2.0 * n_embd + static_cast<double>(n_embd) * head_size) >
          static_cast<double>(1ull << 40)) {
    throw InputError("invalid state geometry L=" + std::to_string(n_layer) + " C=" +
                     std::to_string(n_embd) + " H=" + std::to_string(n_head) + " N=" +
                     std::to_string(head_size) +
                     ": expected positive sizes with H*N == C (use Model::new_state())");
  }
  data_.assign(static_cast<size_t>(n_layer) * layer_stride(), 0.f);
}

void State::reset() { std::fill(data_.begin(), data_.end(), 0.f); }

}  // namespace wick
