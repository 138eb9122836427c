// What continuing a context needs besides its State. A State holds what the model remembers of the
// tokens it absorbed; to pick the next token without feeding new text, a generation also needs
// the logits the model gave after the last of those tokens - and, to draw exactly what an
// uninterrupted seeded run would have drawn, the sampler's RNG position and penalty history.
// Generation results carry one (GenerationResult::continuation), generation calls and engine
// requests accept one, and state files (format 2, wick/state_file.h) store one, so a generation of
// 20 tokens can be split into 10 + 10 with identical tokens.
//
// Thread-safety: a plain value.
#pragma once

#include <optional>
#include <vector>

#include "wick/sampler.h"

namespace wick {

struct Continuation {
  // [V] the logits after the last token the state absorbed (the prompt's last token, or the last
  // generated one); empty when not known (a zero state, a state file of format 1, a generation
  // cancelled during its prefill). With logits, a generation may start with an empty prompt.
  std::vector<float> logits;
  // The sampler after the generation that produced the state; none when not known (a state that
  // only absorbed text). A continuation resumes it unless told to start a fresh sampler.
  std::optional<SamplerSnapshot> sampler;

  bool has_logits() const { return !logits.empty(); }
};

// What a generation with `sampling` continues from, given what a state carries (`stored`): the
// logits always; the sampler only when `resume_sampler` (the front ends: no new seed was given)
// and it is of sampling.mode - else none, so the generation starts a fresh sampler at
// sampling.seed. The one rule the CLI, the server and the Python bindings apply.
Continuation continue_with(Continuation stored, const SamplingConfig& sampling,
                           bool resume_sampler);

}  // namespace wick
