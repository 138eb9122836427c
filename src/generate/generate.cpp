// Generation drivers: one row (generate_tokens) and many rows in lock step (generate_batch). Both
// run the same per-row loop (RowDecoder); they differ only in how the model steps are issued.
#include "wick/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>

#include "generate/row_decoder.h"
#include "wick/errors.h"

namespace wick {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void check_prompt(std::span<const int32_t> prompt, const std::string& where) {
  if (prompt.empty())
    throw InputError("empty prompt" + where +
                     ": generation needs at least one token to continue from (there are no "
                     "logits before the first token)");
}

}  // namespace

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kCancelled: return "cancelled";
    case StopReason::kKvCacheFull: return "kv_cache_full";
    case StopReason::kDeadline: return "deadline";
    case StopReason::kError: return "error";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, StopReason r) { return os << stop_reason_name(r); }

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
  sampling.validate(vocab);
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

using gen::kv_cache_full;

GenerationResult generate_tokens(const Model& model, const Tokenizer& tokenizer,
                                 std::span<const int32_t> prompt, const GenerationConfig& config,
                                 State& state, const ChunkCallback& on_chunk) {
  const int vocab = model.geometry().vocab;
  config.validate(vocab);
  check_prompt(prompt, "");
  gen::RowDecoder row(config, tokenizer, vocab, prompt);

  auto t0 = Clock::now();
  std::vector<float> logits = model.forward(prompt, state);
  const double prefill_ms = ms_since(t0);

  t0 = Clock::now();
  int steps = 0;
  while (!row.finished()) {
    if (kv_cache_full(model, state)) {
      row.stop_kv_cache_full();
      break;
    }
    const int32_t id = row.next(logits, on_chunk);
    // Every returned token is absorbed, including one that stopped the row (the catch-up step).
    logits = model.step(id, state);
    ++steps;
  }
  const double decode_ms = ms_since(t0);
  GenerationResult res = row.finish(on_chunk);
  res.timings.prefill_ms = prefill_ms;
  res.timings.decode_ms = decode_ms;
  res.timings.decode_steps = steps;
  return res;
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config, State& state,
                          const ChunkCallback& on_chunk) {
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  return generate_tokens(model, tokenizer, ids, config, state, on_chunk);
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config) {
  State state = model.new_state();
  return generate(model, tokenizer, prompt, config, state);
}

std::vector<GenerationResult> generate_batch(const Model& model, const Tokenizer& tokenizer,
                                             std::span<const std::vector<int32_t>> prompts,
                                             std::span<const GenerationConfig> configs,
                                             std::span<State> states,
                                             const BatchChunkCallback& on_chunk) {
  const size_t R = prompts.size();
  const int vocab = model.geometry().vocab;
  if (R == 0) throw InputError("generate_batch: no prompts given");
  if (configs.size() != 1 && configs.size() != R)
    throw InputError("generate_batch: " + std::to_string(configs.size()) + " configs for " +
                     std::to_string(R) + " prompts; expected one shared config or one per prompt");
  if (!states.empty() && states.size() != R)
    throw InputError("generate_batch: " + std::to_string(states.size()) + " states for " +
                     std::to_string(R) + " prompts; expected none or one per prompt");

  // Per-row configs: a shared config gives row r the seed + r.
  std::vector<GenerationConfig> row_configs(R);
  for (size_t r = 0; r < R; ++r) {
    row_configs[r] = configs.size() == 1 ? configs[0] : configs[r];
    if (configs.size() == 1) row_configs[r].sampling.seed = configs[0].sampling.seed + r;
    row_configs[r].validate(vocab);
    check_prompt(prompts[r], " (row " + std::to_string(r) + ")");
  }
  std::vector<State> own_states;
  if (states.empty()) {
    own_states.assign(R, model.new_state());
    states = own_states;
  }

  std::vector<std::unique_ptr<gen::RowDecoder>> rows;
  for (size_t r = 0; r < R; ++r)
    rows.push_back(std::make_unique<gen::RowDecoder>(row_configs[r], tokenizer, vocab, prompts[r]));
  std::vector<ChunkCallback> callbacks(R);
  if (on_chunk)
    for (size_t r = 0; r < R; ++r)
      callbacks[r] = [&on_chunk, r](std::string_view c, int32_t id) { return on_chunk(r, c, id); };

  auto t0 = Clock::now();
  std::vector<std::span<const int32_t>> seqs(prompts.begin(), prompts.end());
  std::vector<State*> ptrs;
  for (State& s : states) ptrs.push_back(&s);
  std::vector<float> logits = model.forward_batch(seqs, ptrs);
  const double prefill_ms = ms_since(t0);

  // active[i] = the row whose logits are row i of `logits` (rows with max_tokens 0 drop out now).
  std::vector<size_t> active;
  std::vector<float> kept;
  for (size_t r = 0; r < R; ++r) {
    if (rows[r]->finished()) continue;
    active.push_back(r);
    kept.insert(kept.end(), logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
  }
  logits = std::move(kept);
  std::vector<int> steps(R, 0);
  t0 = Clock::now();
  while (!active.empty()) {
    // Rows whose KV cache cannot take another token stop here, before choosing one.
    if (std::any_of(active.begin(), active.end(),
                    [&](size_t r) { return kv_cache_full(model, states[r]); })) {
      std::vector<size_t> room;
      std::vector<float> room_logits;
      for (size_t i = 0; i < active.size(); ++i) {
        if (kv_cache_full(model, states[active[i]])) {
          rows[active[i]]->stop_kv_cache_full();
          continue;
        }
        room.push_back(active[i]);
        room_logits.insert(room_logits.end(), logits.begin() + i * vocab,
                           logits.begin() + (i + 1) * vocab);
      }
      active = std::move(room);
      logits = std::move(room_logits);
      if (active.empty()) break;
    }
    std::vector<int32_t> ids(active.size());
    std::vector<State*> step_states(active.size());
    for (size_t i = 0; i < active.size(); ++i) {
      const size_t r = active[i];
      ids[i] = rows[r]->next(std::span<const float>(logits).subspan(i * vocab, vocab), callbacks[r]);
      step_states[i] = &states[r];
      ++steps[r];
    }
    // One batched step absorbs every row's token, also the last token of rows that just stopped.
    logits = model.step_batch(ids, step_states);
    bool any_finished = false;
    for (size_t r : active) any_finished |= rows[r]->finished();
    if (!any_finished) continue;
    std::vector<size_t> still;
    std::vector<float> kept;
    for (size_t i = 0; i < active.size(); ++i) {
      if (rows[active[i]]->finished()) continue;
      still.push_back(active[i]);
      kept.insert(kept.end(), logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
    }
    active = std::move(still);
    logits = std::move(kept);
  }
  const double decode_ms = ms_since(t0);

  std::vector<GenerationResult> results;
  for (size_t r = 0; r < R; ++r) {
    results.push_back(rows[r]->finish(callbacks[r]));
    results.back().timings.prefill_ms = prefill_ms;
    results.back().timings.decode_ms = decode_ms;
    results.back().timings.decode_steps = steps[r];
  }
  return results;
}

}  // namespace wick
