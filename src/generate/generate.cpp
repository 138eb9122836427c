#include "wick/generate.h"

#include <algorithm>
#include <chrono>

#include "wick/errors.h"

namespace wick {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != logits[i]) continue;  // NaN
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  if (best < 0) throw InputError("all logits are NaN; the model produced no usable prediction");
  return best;
}

GenerationResult generate_tokens(const Model& model, const Tokenizer& tokenizer,
                                 std::span<const int32_t> prompt, const GenerationConfig& config,
                                 State& state, const TokenCallback& on_token) {
  if (config.max_tokens < 0) throw InputError("max_tokens must be >= 0, got " + std::to_string(config.max_tokens));
  if (prompt.empty()) throw InputError("empty prompt: expected at least one token to condition on");
  GenerationResult res;
  res.prompt_tokens = static_cast<int>(prompt.size());
  res.stop_reason = "max_tokens";

  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = model.forward(prompt, state);
  res.timings.prefill_ms = ms_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < config.max_tokens; ++i) {
    const int32_t tok = argmax(logits);
    res.tokens.push_back(tok);
    std::string bytes = tokenizer.decode(std::span<const int32_t>(&tok, 1));
    res.text += bytes;
    // Absorb the token so the state continues after everything returned.
    logits = model.step(tok, state);
    ++res.timings.decode_steps;
    if (std::find(config.stop_tokens.begin(), config.stop_tokens.end(), tok) !=
        config.stop_tokens.end()) {
      res.stop_reason = "stop_token";
      if (on_token) on_token(tok, bytes);
      break;
    }
    if (on_token && !on_token(tok, bytes)) {
      res.stop_reason = "cancelled";
      break;
    }
  }
  res.timings.decode_ms = ms_since(t0);
  return res;
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config, State& state,
                          const TokenCallback& on_token) {
  std::vector<int32_t> ids = tokenizer.encode(prompt);
  return generate_tokens(model, tokenizer, ids, config, state, on_token);
}

}  // namespace wick
