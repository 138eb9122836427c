// The shared pieces of wick/generation.h: stop reason names, GenerationConfig::validate, default
// stop tokens and greedy argmax. (utf8_boundary is with the stop-string search,
// generate/stop_search.cpp.)
#include "wick/generation.h"

#include <ostream>
#include <string>

#include "wick/errors.h"

namespace wick {

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens:
      return "max_tokens";
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop_string";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kKvCacheFull:
      return "kv_cache_full";
    case StopReason::kDeadline:
      return "deadline";
    case StopReason::kError:
      return "error";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, StopReason r) {
  return os << stop_reason_name(r);
}

void GenerationConfig::validate(int vocab) const {
  if (max_tokens < 0)
    throw InputError("max_tokens must be >= 0, got " + std::to_string(max_tokens));
  for (size_t i = 0; i < stop_strings.size(); ++i)
    if (stop_strings[i].empty())
      throw InputError("stop string " + std::to_string(i) +
                       " is empty: an empty string would match everywhere; remove it");
  if (vocab > 0)
    for (int32_t t : stop_tokens)
      if (t < 0 || t >= vocab)
        throw InputError("stop token " + std::to_string(t) + " is outside the vocabulary [0, " +
                         std::to_string(vocab) + ")");
  if (logprobs < -1 || logprobs > 20)
    throw InputError("logprobs must be -1 (off) or 0..20 alternatives, got " +
                     std::to_string(logprobs));
  if (speculative.n_max < 0 || speculative.n_max > SpeculativeConfig::kMaxDraft)
    throw InputError("speculative.n_max (draft tokens per pass) must be 0 (off) or 1.." +
                     std::to_string(SpeculativeConfig::kMaxDraft) + ", got " +
                     std::to_string(speculative.n_max));
  sampling.validate(vocab);
}

std::vector<int32_t> default_stop_tokens(int vocab) {
  if (vocab == 65536) return {0};
  return {};
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != logits[i]) continue;  // NaN
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  if (best < 0) throw InputError("all logits are NaN; the model produced no usable prediction");
  return best;
}

}  // namespace wick
