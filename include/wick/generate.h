// Text generation: prefill the prompt with the parallel pass, then decode token by token with the
// recurrent step. This build decodes greedily (argmax, ties to the lowest id); sampling plugs in
// here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/model.h"
#include "wick/state.h"
#include "wick/tokenizer.h"

namespace wick {

struct GenerationConfig {
  int max_tokens = 64;                // generated tokens at most (>= 0)
  std::vector<int32_t> stop_tokens;   // generation ends after producing one of these
};

struct GenerationTimings {
  double prefill_ms = 0;  // parallel pass over the prompt
  double decode_ms = 0;   // all recurrent steps
  int decode_steps = 0;   // recurrent steps run (generated tokens, each absorbed into the state)
};

struct GenerationResult {
  std::string text;             // bytes of the generated tokens
  std::vector<int32_t> tokens;  // generated token ids (a stop token included)
  std::string stop_reason;      // "max_tokens" | "stop_token" | "cancelled" ("stop_string" is
                                // reserved for stop strings, which arrive with sampling)
  int prompt_tokens = 0;
  GenerationTimings timings;
};

// Called after each generated token with its id and bytes; return false to cancel.
using TokenCallback = std::function<bool(int32_t token, std::string_view bytes)>;

// Greedy index of the largest logit (lowest index on ties; NaN never wins).
int32_t argmax(std::span<const float> logits);

// Generates from `prompt`, continuing from `state` (fresh: model.new_state()). Afterwards the state
// has absorbed the prompt and every returned token. Throws InputError for an empty prompt, a
// negative max_tokens, or ids the model cannot take (the state is then unchanged); and, after the
// prompt was absorbed, if the model produces all-NaN logits (argmax).
GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config, State& state,
                          const TokenCallback& on_token = nullptr);

// Same, from token ids instead of text.
GenerationResult generate_tokens(const Model& model, const Tokenizer& tokenizer,
                                 std::span<const int32_t> prompt, const GenerationConfig& config,
                                 State& state, const TokenCallback& on_token = nullptr);

}  // namespace wick
