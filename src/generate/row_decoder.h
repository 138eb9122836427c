// One generation row's loop body (docs/tasks.md §2.3), independent of how its model steps are
// run: the single-row driver steps one State, the batch driver steps many rows in one call. The
// driver feeds logits in, the decoder picks the next token, tracks bytes, stop tokens and
// strings, streaming and cancellation; the driver then steps every token the decoder returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "wick/generation.h"
#include "wick/model.h"
#include "wick/sampler.h"
#include "wick/tokenizer.h"

namespace wick::gen {

class RowDecoder {
 public:
  // config must be validated; `tokenizer` must outlive the decoder. `resume`, when set, is the
  // sampler of the generation being continued (Sampler::restore; throws InputError if it does
  // not fit); the prompt's penalty observations (penalize_prompt) come after it.
  RowDecoder(const GenerationConfig& config, const Tokenizer& tokenizer, int vocab,
             std::span<const int32_t> prompt,
             const std::optional<SamplerSnapshot>& resume = std::nullopt);

  // True once the row has stopped (or max_tokens is 0): no more tokens to pick.
  bool finished() const { return finished_; }

  // Picks the next token from `logits` [V] and runs the loop's checks on it; `on_chunk` may be
  // empty. The caller must absorb the returned token into the row's state (every returned token
  // is stepped, including the one that stopped the row).
  // With GenerationConfig::logprobs >= 0 the token's TokenLogprob is recorded (and handed to
  // `on_logprob`, if any, before `on_chunk` is called for the same token).
  int32_t next(std::span<const float> logits, const ChunkCallback& on_chunk,
               const std::function<void(const TokenLogprob&)>& on_logprob = nullptr);

  // Ends the row before its next token because the model cannot absorb one more (an RWKV-X KV
  // cache at AttentionOptions::kv_max): stop reason "kv_cache_full".
  void stop_kv_cache_full() { stop(StopReason::kKvCacheFull); }

  // Ends the row before its next token for `reason` (cancelled from outside, deadline, error). A
  // token already returned by next() must still be absorbed by the driver.
  void stop(StopReason reason) {
    finished_ = true;
    result_.stop_reason = reason;
  }

  // The ids returned so far.
  const std::vector<int32_t>& tokens() const { return result_.tokens; }

  // The sampler's RNG position and history now (for GenerationResult::continuation).
  SamplerSnapshot sampler_snapshot() const { return sampler_.snapshot(); }

  // Final flush to the callback and the result (text, tokens, stop reason; timings left to the
  // driver except sample_ms).
  GenerationResult finish(const ChunkCallback& on_chunk);

 private:
  const GenerationConfig& config_;
  const Tokenizer& tokenizer_;
  Sampler sampler_;
  size_t hold_ = 0;  // longest stop string - 1: how far back a new match can start
  std::string bytes_;
  size_t emitted_ = 0;
  bool finished_ = false;
  GenerationResult result_;
  double sample_ms_ = 0;
};

// The log-probability of `id` and the `top` most probable ids under the log-softmax of `adjusted`
// (GenerationConfig::logprobs).
TokenLogprob token_logprob(std::span<const float> adjusted, int32_t id, int top);

// An RWKV-X KV cache at its limit cannot absorb another token (every chosen token is absorbed).
bool kv_cache_full(const Model& model, const State& state);

// Raw bytes of one id for the sampler's per-id tables ("" for ids without bytes: 0, or ids the
// tokenizer lacks).
std::string token_bytes(const Tokenizer& tokenizer, int32_t id);

// Raw bytes of one generated id. Throws InputError naming the id when the tokenizer does not have
// it (a tokenizer that does not match the model): a generated id is never dropped silently.
std::string generated_token_bytes(const Tokenizer& tokenizer, int32_t id);

}  // namespace wick::gen
