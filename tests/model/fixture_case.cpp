#include "model/fixture_case.h"

#include <algorithm>

namespace wick::test {

ReferenceState split_state(const State& s) {
  ReferenceState r;
  for (int l = 0; l < s.n_layer(); ++l) {
    r.att_shift.insert(r.att_shift.end(), s.att_shift(l), s.att_shift(l) + s.n_embd());
    r.wkv.insert(r.wkv.end(), s.wkv(l), s.wkv(l) + s.wkv_size());
    r.ffn_shift.insert(r.ffn_shift.end(), s.ffn_shift(l), s.ffn_shift(l) + s.n_embd());
  }
  return r;
}

ReferenceState read_state(const io::TensorSet& set, const std::string& prefix) {
  return {floats(set, prefix + "att_shift"), floats(set, prefix + "wkv"),
          floats(set, prefix + "ffn_shift")};
}

StateDiff diff(const ReferenceState& a, const ReferenceState& b) {
  return {max_abs_diff(a.att_shift, b.att_shift), max_abs_diff(a.wkv, b.wkv),
          max_abs_diff(a.ffn_shift, b.ffn_shift)};
}

}  // namespace wick::test
