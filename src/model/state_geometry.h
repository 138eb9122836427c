// The one check that a state belongs to a model. A State, and a state file's metadata, carry the
// numbers of the model that made it - L blocks, width C, H heads of size N, N_a attention blocks
// (RWKV-X) - and only a model with the same numbers may run, save or continue it. Every place that
// takes a state from outside (the forward passes, the engine, save_state / load_state, the
// reranker's pair states) asks this one function, and refuses with its one message.
#pragma once

#include <string>
#include <string_view>

#include "wick/geometry.h"
#include "wick/state.h"

namespace wick {

// The numbers a state records of its model.
struct StateGeometry {
  int n_layer = 0;    // L
  int n_embd = 0;     // C
  int n_head = 0;     // H
  int head_size = 0;  // N
  int n_attn = 0;     // N_a (0: plain RWKV-7)
  bool operator==(const StateGeometry&) const = default;

  static StateGeometry of(const State& s) {
    return {s.n_layer(), s.n_embd(), s.n_head(), s.head_size(), s.n_attn()};
  }
  static StateGeometry of(const Geometry& g) {
    return {g.n_layer, g.n_embd, g.n_head, g.head_size, g.n_attn};
  }
};

// "L=2, C=64, H=1, N=64", with ", attention blocks=A" when A != 0.
std::string geometry_text(const StateGeometry& g);

// Whether a state of geometry `found` fits `model`. No allocation: the test of the hot paths.
inline bool state_fits(const StateGeometry& found, const Geometry& model) {
  return found == StateGeometry::of(model);
}
inline bool state_fits(const State& s, const Geometry& model) {
  return state_fits(StateGeometry::of(s), model);
}

// The one refusal, for callers that throw another error type (load_state: StateFileError):
// "<subject> has geometry (L=.., ...) but the model has (L=.., ...); a state only runs on the
// model that made it: create it with Model::new_state() of this model, or load a state file saved
// by it". `subject` names the state ("the state", "pair state 3", ...).
std::string state_mismatch_message(const StateGeometry& found, const Geometry& model,
                                   std::string_view subject);

// Throws InputError with state_mismatch_message.
[[noreturn]] void throw_state_mismatch(const StateGeometry& found, const Geometry& model,
                                       std::string_view subject);

// Throws InputError with state_mismatch_message unless the state fits the model.
inline void check_state_fits(const State& s, const Geometry& model, std::string_view subject) {
  if (!state_fits(s, model)) throw_state_mismatch(StateGeometry::of(s), model, subject);
}

}  // namespace wick
