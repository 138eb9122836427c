// What the engine tests share: a generation config, a request's solo run through
// generate_tokens() (the reference every engine row must equal), and a streamed submission.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wick/engine.h"
#include "wick/generate.h"
#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::test {

// max_tokens tokens; greedy, or sampled at `temperature` with top-p 0.9 and this seed.
inline GenerationConfig generation_config(uint64_t seed, int max_tokens, bool sampled,
                                          float temperature = 1.0f) {
  GenerationConfig c;
  c.max_tokens = max_tokens;
  if (sampled) {
    c.sampling.temperature = temperature;
    c.sampling.top_p = 0.9f;
    c.sampling.seed = seed;
  }
  return c;
}

// A request run alone: its result, the text its callback streamed and its final state.
struct Solo {
  GenerationResult result;
  std::string streamed;
  State state;
};

inline Solo run_solo(const Model& m, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                     const GenerationConfig& c) {
  Solo s;
  s.state = m.new_state();
  s.result = generate_tokens(m, tok, prompt, c, s.state, [&](std::string_view chunk, int32_t) {
    s.streamed += chunk;
    return true;
  });
  return s;
}

// Submits with a streaming callback that appends to `*streamed`.
inline RequestHandle submit_streamed(Engine& e, std::vector<int32_t> prompt,
                                     const GenerationConfig& c, std::string* streamed,
                                     bool use_cache = true) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.config = c;
  r.use_cache = use_cache;
  r.on_chunk = [streamed](std::string_view chunk, int32_t) {
    *streamed += chunk;
    return true;
  };
  return e.submit(std::move(r));
}

}  // namespace wick::test
