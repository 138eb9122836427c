#include "generate/row_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/timing.h"
#include "generate/stop_search.h"
#include "wick/errors.h"

namespace wick::gen {

bool kv_cache_full(const Model& model, const State& state) {
  const int64_t limit = model.attention().kv_max;
  return model.geometry().n_attn > 0 && limit > 0 && state.kv_length() >= limit;
}

std::string token_bytes(const Tokenizer& tokenizer, int32_t id) {
  if (id < 0 || id >= tokenizer.vocab_size()) return {};
  try {
    return tokenizer.decode(std::span<const int32_t>(&id, 1));
  } catch (const InputError&) {
    return {};  // an id inside the range that has no entry (a gap in the vocabulary)
  }
}

std::string generated_token_bytes(const Tokenizer& tokenizer, int32_t id) {
  try {
    return tokenizer.decode(std::span<const int32_t>(&id, 1));
  } catch (const InputError& e) {
    throw InputError("the model generated token id " + std::to_string(id) + ", which the " +
                     std::string(tokenizer.name()) + " tokenizer (ids 0.." +
                     std::to_string(tokenizer.vocab_size() - 1) + ") cannot decode (" + e.what() +
                     "); the tokenizer does not match the model: use the model's own tokenizer");
  }
}

RowDecoder::RowDecoder(const GenerationConfig& config, const Tokenizer& tokenizer, int vocab,
                       std::span<const int32_t> prompt,
                       const std::optional<SamplerSnapshot>& resume)
    : config_(config),
      tokenizer_(tokenizer),
      sampler_(config.sampling, vocab,
               [&tokenizer](int32_t id) { return token_bytes(tokenizer, id); }) {
  if (resume) sampler_.restore(*resume);
  for (const std::string& s : config.stop_strings) hold_ = std::max(hold_, s.size() - 1);
  if (config.penalize_prompt) sampler_.observe_prompt(prompt);
  result_.prompt_tokens = static_cast<int>(prompt.size());
  result_.stop_reason = StopReason::kMaxTokens;
  finished_ = config.max_tokens == 0;
}

TokenLogprob token_logprob(std::span<const float> adjusted, int32_t id, int top) {
  // log p[i] = z[i] - (m + log sum exp(z - m)), in double; -inf entries contribute nothing.
  double m = -std::numeric_limits<double>::infinity();
  for (float z : adjusted) m = std::max(m, static_cast<double>(z));
  double sum = 0;
  for (float z : adjusted)
    if (z > -std::numeric_limits<float>::infinity()) sum += std::exp(static_cast<double>(z) - m);
  const double lse = m + std::log(sum);
  auto lp = [&](int32_t i) { return static_cast<float>(static_cast<double>(adjusted[i]) - lse); };
  TokenLogprob out;
  out.token = id;
  out.logprob = lp(id);
  if (top > 0) {
    std::vector<int32_t> order;
    order.reserve(adjusted.size());
    for (size_t i = 0; i < adjusted.size(); ++i)
      if (adjusted[i] > -std::numeric_limits<float>::infinity())
        order.push_back(static_cast<int32_t>(i));
    const size_t k = std::min(order.size(), static_cast<size_t>(top));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](int32_t a, int32_t b) {
                        return adjusted[a] != adjusted[b] ? adjusted[a] > adjusted[b] : a < b;
                      });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(order[i], lp(order[i]));
  }
  return out;
}

int32_t RowDecoder::next(std::span<const float> logits, const ChunkCallback& on_chunk,
                         const std::function<void(const TokenLogprob&)>& on_logprob) {
  const base::Stopwatch timer;
  // Before select(): the log-probabilities see the same history as the draw.
  std::vector<float> adjusted;
  if (config_.logprobs >= 0) adjusted = sampler_.adjusted_logits(logits);
  const int32_t id = sampler_.select(logits);
  if (config_.logprobs >= 0) {
    result_.logprobs.push_back(token_logprob(adjusted, id, config_.logprobs));
    if (on_logprob) on_logprob(result_.logprobs.back());
  }
  const bool is_stop = std::find(config_.stop_tokens.begin(), config_.stop_tokens.end(), id) !=
                       config_.stop_tokens.end();
  // ChatRWKV never counts a stop id (§1.6); the standard history observes every chosen token.
  if (!(is_stop && config_.sampling.mode == SamplerMode::kChatRwkv)) sampler_.observe(id);
  sample_ms_ += timer.elapsed_ms();
  result_.tokens.push_back(id);
  if (static_cast<int>(result_.tokens.size()) >= config_.max_tokens) finished_ = true;

  if (is_stop) {
    result_.stop_reason = StopReason::kStopToken;
    result_.stop_token = id;
    finished_ = true;
    return id;
  }
  const size_t grew_from = bytes_.size();
  bytes_ += generated_token_bytes(tokenizer_, id);
  // A new match must overlap the bytes just added, so the search starts hold_ bytes before them.
  const StopHit hit =
      find_stop(bytes_, grew_from > hold_ ? grew_from - hold_ : 0, config_.stop_strings);
  if (hit.found()) {
    bytes_.resize(hit.pos);
    result_.stop_reason = StopReason::kStopString;
    result_.stop_string = config_.stop_strings[hit.index];
    finished_ = true;
    return id;
  }
  if (on_chunk) {
    // Held back: only a tail that could still become a stop string, and an incomplete character.
    const size_t limit = partial_stop_start(bytes_, config_.stop_strings);
    const size_t safe_end = std::max(emitted_, utf8_boundary(bytes_, limit));
    const std::string chunk =
        utf8_replace_invalid(std::string_view(bytes_).substr(emitted_, safe_end - emitted_));
    emitted_ = safe_end;
    if (!on_chunk(chunk, id)) {
      result_.stop_reason = StopReason::kCancelled;
      finished_ = true;
    }
  }
  return id;
}

GenerationResult RowDecoder::finish(const ChunkCallback& on_chunk) {
  if (on_chunk && result_.stop_reason != StopReason::kCancelled && emitted_ < bytes_.size() &&
      !result_.tokens.empty()) {
    on_chunk(utf8_replace_invalid(std::string_view(bytes_).substr(emitted_)),
             result_.tokens.back());
    emitted_ = bytes_.size();
  }
  result_.text = utf8_replace_invalid(bytes_);
  result_.generated_tokens = static_cast<int>(result_.tokens.size());
  result_.timings.sample_ms = sample_ms_;
  return result_;
}

}  // namespace wick::gen
