// Reading the tiny-rwkv7 reference fixtures (../shared/fixtures/tiny-rwkv7/README.md): tokens,
// logits after every token, the state after the tokens, and the greedy continuation.
#pragma once

#include <string>
#include <vector>

#include "test_util.h"
#include "wick/model.h"

namespace wick::test {

struct ReferenceState {
  std::vector<float> att_shift, wkv, ffn_shift;  // [L, C], [L, H, N, N], [L, C]
};

// Splits a State into the fixture's three stacked tensors.
ReferenceState split_state(const State& s);
// Reads "<prefix>att_shift", "<prefix>wkv", "<prefix>ffn_shift" (e.g. prefix "state.").
ReferenceState read_state(const io::TensorSet& set, const std::string& prefix);

struct StateDiff {
  double att_shift = 0, wkv = 0, ffn_shift = 0;
  double max() const { return std::max({att_shift, wkv, ffn_shift}); }
};
StateDiff diff(const ReferenceState& a, const ReferenceState& b);

}  // namespace wick::test
