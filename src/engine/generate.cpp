// The one-shot generation drivers of wick/generate.h: generate() / generate_tokens() (one row) and
// generate_batch() (many rows) submit their rows to a private Engine started for the call - the
// library's one generation loop - and copy the results and final states back.
#include "wick/generate.h"

#include <algorithm>
#include <memory>

#include "runtime/runtime_impl.h"
#include "wick/engine.h"
#include "wick/errors.h"

namespace wick {
namespace {

void check_prompt(std::span<const int32_t> prompt, const std::string& where) {
  if (prompt.empty())
    throw InputError("empty prompt" + where +
                     ": generation needs at least one token to continue from (there are no "
                     "logits before the first token)");
}

// Runs rows on a private engine (the one generation loop, wick/engine.h) and copies the results
// and final states back. All-or-nothing on refusal: the engine works on copies of the states, so
// an InputError from submit() leaves every caller state unchanged. A row that failed after its
// prefill (sampler error, callback exception) still hands its state back - the prompt and the
// tokens stepped so far - and its exception is rethrown once every row has ended. Empty `states`:
// every row starts from the zero state and its final state is dropped (no copies either way).
std::vector<GenerationResult> run_rows(const Model& model, const Tokenizer& tokenizer,
                                       std::span<const std::vector<int32_t>> prompts,
                                       std::span<const GenerationConfig> configs,
                                       std::span<State> states,
                                       std::span<const ChunkCallback> callbacks,
                                       const Continuation* from = nullptr) {
  const size_t R = prompts.size();
  size_t total = 0;
  for (const auto& p : prompts) total += p.size();
  EngineOptions o;
  o.max_rows = static_cast<int>(R);
  o.queue_length = static_cast<int>(R);
  // One pass prefills every prompt (as a batched forward over all of them would).
  o.prefill_chunk = o.prefill_chunk_idle = static_cast<int>(std::max<size_t>(total, 1));
  o.itl_ratio = 0;  // the rows start together: nothing decodes while they prefill
  o.cache_bytes = 0;
  if (RuntimeLease::held_by_this_thread(*model.runtime()))
    throw InputError(
        "generate() was called from inside a pass on the same Runtime (for example "
        "from an ActivationTrace callback); use a Model with a Runtime of its own "
        "(Model::with_runtime)");
  Engine engine(model, tokenizer, o);
  std::vector<Request> requests(R);
  for (size_t r = 0; r < R; ++r) {
    Request& q = requests[r];
    q.prompt_tokens = prompts[r];
    q.config = configs[r];
    if (!states.empty()) q.initial_state = states[r];
    q.use_cache = false;
    q.on_chunk = callbacks[r];
    if (from) q.continuation = *from;
  }
  // All or nothing: every row is checked before any starts (no callback runs for a call that
  // throws InputError).
  const std::vector<RequestHandle> handles = engine.submit_all(std::move(requests));
  std::vector<GenerationResult> results(R);
  std::exception_ptr failure;
  for (size_t r = 0; r < R; ++r) {
    const EngineResult& e = handles[r].wait();
    if (!states.empty() && !e.state.empty()) states[r] = e.state;
    if (e.stop_reason == StopReason::kError && !failure)
      failure = e.exception ? e.exception : std::make_exception_ptr(InputError(e.error));
    results[r] = static_cast<const GenerationResult&>(e);
  }
  if (failure) std::rethrow_exception(failure);
  return results;
}

// One row: the config and prompt checked before anything runs (an empty prompt is allowed only
// when `from` carries logits to continue from). `state`: one State to start from and receive the
// final state, or empty for the zero state with the final state dropped.
GenerationResult run_one(const Model& model, const Tokenizer& tokenizer,
                         std::span<const int32_t> prompt, const GenerationConfig& config,
                         std::span<State> state, const ChunkCallback& on_chunk,
                         const Continuation* from = nullptr) {
  config.validate(model.geometry().vocab);
  if (!from || !from->has_logits()) check_prompt(prompt, "");
  const std::vector<int32_t> ids(prompt.begin(), prompt.end());
  return run_rows(model, tokenizer, std::span(&ids, 1), std::span(&config, 1), state,
                  std::span(&on_chunk, 1), from)[0];
}

}  // namespace

GenerationResult generate_tokens(const Model& model, const Tokenizer& tokenizer,
                                 std::span<const int32_t> prompt, const GenerationConfig& config,
                                 State& state, const ChunkCallback& on_chunk) {
  return run_one(model, tokenizer, prompt, config, std::span(&state, 1), on_chunk);
}

GenerationResult generate_tokens(const Model& model, const Tokenizer& tokenizer,
                                 std::span<const int32_t> prompt, const GenerationConfig& config,
                                 State& state, const Continuation& from,
                                 const ChunkCallback& on_chunk) {
  return run_one(model, tokenizer, prompt, config, std::span(&state, 1), on_chunk, &from);
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config, State& state, const Continuation& from,
                          const ChunkCallback& on_chunk) {
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  return generate_tokens(model, tokenizer, ids, config, state, from, on_chunk);
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config, State& state,
                          const ChunkCallback& on_chunk) {
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  return generate_tokens(model, tokenizer, ids, config, state, on_chunk);
}

GenerationResult generate(const Model& model, const Tokenizer& tokenizer, std::string_view prompt,
                          const GenerationConfig& config) {
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  // From the zero state, the final state dropped: no state is copied in or out.
  return run_one(model, tokenizer, ids, config, {}, ChunkCallback{});
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
  std::vector<ChunkCallback> callbacks(R);
  if (on_chunk)
    for (size_t r = 0; r < R; ++r)
      callbacks[r] = [&on_chunk, r](std::string_view c, int32_t id) { return on_chunk(r, c, id); };
  return run_rows(model, tokenizer, prompts, row_configs, states, callbacks);
}

}  // namespace wick
