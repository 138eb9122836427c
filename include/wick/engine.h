// The serving engine: one long-lived object that owns a Model, takes generation requests from any
// thread at any time and runs them together with continuous batching (README "Serving engine").
//
// Iteration. One engine thread loops: admit queued requests (up to EngineOptions::max_rows
// running), build ONE batched pass from every running row - a decode row contributes its one
// pending token, a row in prefill a chunk of its prompt (the rows in prefill share a token budget
// per iteration, so a long prompt never freezes the streams that are decoding) - run it
// (Model::forward_batch), then sample, stop-check and stream each row whose prompt is absorbed.
// Finished or cancelled rows leave at once; new rows join at the next iteration.
//
// Speculative decoding (GenerationConfig::speculative, per request): a speculating decode row
// contributes its pending tokens plus its n-gram draft, run from a copy of its state, and verifies
// the draft with its own sampler on the pass's every-position logits (wick/generate.h
// SpeculativeConfig); its results stay those of plain decoding. An iteration with drafts runs the
// decode rows (all positions) and the prefill chunks (last positions) as two passes. The prefix
// cache only ever stores states of decided tokens.
//
// Per-row semantics are exactly generate_tokens()'s (wick/generate.h): the sampler and its seed,
// stop tokens, stop strings across the byte stream, UTF-8-safe streaming with the hold-back rule,
// the state rule (EngineResult::state has absorbed the prompt and every returned token, the one
// that stopped the row included) and the stop reasons, plus two of the engine's own: kDeadline and
// kError.
//
// Batch invariance. wick's batched pass computes every row with the single-row arithmetic and a
// chunked prefill gives the same bits as a whole one, so a request's tokens, text and final state
// are bit-identical whether it runs alone, among other requests, joins mid-way, is prefilled in
// any chunking, or starts from a cached prefix - greedy and seeded sampling alike.
//
// Prefix cache. When a row has absorbed its prompt, and when it finishes, the engine stores the
// state and the logits of its last position in a PrefixCache (wick/prefix_cache.h) under the
// request's scope (cache_scope(): weights, precision, quantisation, attention options, the
// request's LoRA adapter, initial state, state format) and token ids. A request starts from the
// longest cached prefix of its prompt and prefills only the rest (EngineResult::cached_tokens); a
// prompt cached whole needs no pass before its first token. Note: a reply's generated ids need not
// equal the tokenizer's re-encoding of the same text, so a follow-up that re-sends the history as
// text may miss the (prompt + reply) entry; the prompt-end entry always matches.
//
// Threading. submit(), cancel(), register_state(), stats() and RequestHandle's members may be
// called from any thread. Callbacks (Request::on_chunk, on_done) run on the engine thread: they
// must not block (hand chunks to a queue), and must not call wait() on a handle of this engine,
// shutdown(), or destroy the engine (each would wait on itself). An exception thrown by on_chunk
// ends that request with StopReason::kError; one thrown by on_done is ignored. The engine runs
// its passes on its Model's Runtime (wick/runtime.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "wick/generation.h"
#include "wick/lora.h"
#include "wick/model.h"
#include "wick/prefix_cache.h"
#include "wick/state.h"
#include "wick/tokenizer.h"

namespace wick {

struct EngineOptions {
  int max_rows = 16;  // requests running at once (rows of the batched pass); >= 1
  // Most prompt tokens prefilled per iteration, all rows in prefill together, while other rows
  // are decoding (bounds how long a long prompt delays their next token); >= 1.
  int prefill_chunk = 256;
  // The same budget when no row is decoding (throughput of the prefill itself); >= prefill_chunk.
  int prefill_chunk_idle = 1024;
  // While rows decode, the prefill chunk is also kept small enough that an iteration takes at
  // most this many times a decode-only iteration (estimated from the passes measured so far), so
  // the decoding streams' inter-token latency stays within that factor while a long prompt
  // prefills. 0: only prefill_chunk bounds it. Chunk sizes never change results (batch
  // invariance). >= 1 or 0.
  double itl_ratio = 1.6;
  int queue_length = 256;                        // requests waiting for a row; >= 1
  size_t cache_bytes = size_t{256} << 20;        // local prefix-cache budget; 0 disables it
  std::shared_ptr<PrefixCacheTier> second_tier;  // optional shared tier (replicas); may be null
  // Throws InputError for a value out of range.
  void validate() const;
};

// How many tokens of a request were served from the cache, and from where.
enum class CacheTier { kNone, kLocal, kSecond };
std::string_view cache_tier_name(CacheTier t);  // "none", "local", "redis"

struct EngineResult : GenerationResult {
  State state;            // the row's final state (state rule above); empty for a request that
                          // never got a row (cancelled or past its deadline while queued).
                          // Cancelled or past its deadline during prefill: the prompt tokens
                          // absorbed so far. StopReason::kError: what the row had absorbed
  int cached_tokens = 0;  // prompt tokens taken from the prefix cache instead of prefilled
  CacheTier cache_tier = CacheTier::kNone;
  std::string error;             // with StopReason::kError: what went wrong
  std::exception_ptr exception;  // with StopReason::kError: the exception itself (the sampler's
                                 // InputError, a callback's exception, a ContextFullError)
  double queue_ms = 0;           // submit() to admission
  double ttft_ms = 0;            // submit() to the first generated token (0 when none)
  double total_ms = 0;           // submit() to completion
  std::vector<double> token_times_ms;  // per generated token: submit() to its sampling
};

using EngineClock = std::chrono::steady_clock;

struct Request {
  // The prompt: text (encoded with the engine's tokenizer by submit()) or token ids; exactly one
  // is non-empty.
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  GenerationConfig config;
  // Initial state: none of the two = a zero state; `initial_state` a given State (continued, as
  // generate() continues its state argument); `state_id` a state registered with the engine.
  std::optional<State> initial_state;
  std::string state_id;
  // LoRA adapter (wick/lora.h) for this request's rows in place of the model's own adapter()
  // (null: the model's own, usually none). Rows of different adapters share the batched pass
  // (Model::forward_batch with per-sequence adapters), each bit-identical to running alone; the
  // adapter's fingerprint is part of the request's cache scope, so prefixes computed with one
  // adapter never serve another. Must have been loaded for this model's geometry. Shared, not
  // copied; the engine holds it until the request ends.
  std::shared_ptr<const LoraAdapter> adapter;
  // What continuing the initial state needs (wick/continuation.h, generate()'s `from`): with
  // logits [V] the prompt may be empty (the first token is picked from them); a sampler snapshot
  // replaces the fresh sampler's RNG position and penalty history.
  Continuation continuation;
  // Past this time the request ends with StopReason::kDeadline (queued or running).
  EngineClock::time_point deadline = EngineClock::time_point::max();
  // Streamed text as in generate() (return false to cancel); may be empty.
  ChunkCallback on_chunk;
  // With config.logprobs >= 0: each generated token's log-probabilities, on the engine thread,
  // before that token's on_chunk call; may be empty.
  std::function<void(const TokenLogprob&)> on_logprob;
  // Called once with the result when the request ends (any reason); may be empty.
  std::function<void(const EngineResult&)> on_done;
  bool use_cache = true;  // look up and store prefixes of this request
  // Extra prefix lengths (ascending, each < the prompt length): the chat template's message
  // boundaries. They are probed in the second tier (the whole prompt always is), and the prefill
  // stores the state at each one it passes in the cache (a chunk then ends there, which never
  // changes results), so a later request sharing only the first messages (a long system prompt)
  // starts from there.
  std::vector<size_t> cache_boundaries;
};

namespace detail {
struct RequestControl;
}

// A submitted request. Copies refer to the same request. Thread-safe.
class RequestHandle {
 public:
  RequestHandle() = default;
  uint64_t id() const;
  bool done() const;
  // Blocks until the request ends; the result lives as long as any handle of the request.
  // Must not be called from a callback of the same engine (it would wait on itself). Throws
  // InputError on an empty handle (not from submit()); a failed request is not an exception here:
  // its result has StopReason::kError, `error` and `exception`.
  const EngineResult& wait() const&;
  // On a temporary handle (engine.submit(r).wait()): a copy, which outlives the handle.
  EngineResult wait() const&& { return static_cast<const RequestHandle&>(*this).wait(); }
  // As wait(), up to `timeout`; null on timeout. Throws InputError on an empty handle.
  const EngineResult* wait_for(std::chrono::milliseconds timeout) const;
  // Asks the engine to end the request (StopReason::kCancelled); no effect once done. A row in
  // decode still absorbs the token it already returned (state rule); a row in prefill ends with
  // the prompt tokens absorbed so far.
  void cancel() const;
  bool valid() const { return ctl_ != nullptr; }

 private:
  friend class Engine;
  explicit RequestHandle(std::shared_ptr<detail::RequestControl> ctl) : ctl_(std::move(ctl)) {}
  std::shared_ptr<detail::RequestControl> ctl_;
};

struct EngineStats {
  uint64_t submitted = 0, completed = 0, refused = 0;
  int queued = 0, running = 0;
  uint64_t iterations = 0;   // batched passes run
  uint64_t pass_rows = 0;    // rows over all passes
  uint64_t pass_tokens = 0;  // tokens over all passes
  double pass_ms = 0;        // time inside Model::forward_batch
  double busy_ms = 0;        // time inside iterations (passes + sampling + streaming + cache)
  // Speculative decoding (GenerationConfig::speculative): draft tokens verified, and of which
  // accepted (picked by the row's sampler), over all requests.
  uint64_t spec_drafted = 0, spec_accepted = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens of admitted requests
  uint64_t cached_tokens = 0;  // of which served from the cache
  PrefixCacheStats cache;
  bool has_second_tier = false;      // EngineOptions::second_tier is set
  PrefixCacheTierStats second_tier;  // its own counters
};

class Engine {
 public:
  // Starts the engine thread. `tokenizer` must outlive the engine. The passes run on `runtime`
  // when given (the model is moved onto it: Model::with_runtime), else on the model's own. Give
  // each engine its own Runtime to run engines in parallel. Throws InputError for invalid options
  // or a model without LM head.
  Engine(Model model, const Tokenizer& tokenizer, EngineOptions options = {},
         std::shared_ptr<Runtime> runtime = nullptr);
  // Cancels every queued and running request (each completes with kCancelled) and joins the
  // engine thread.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws (nothing queued) InputError for an invalid config
  // (GenerationConfig::validate), an empty prompt without continuation logits, logits that are not
  // [V], a sampler snapshot that does not fit (Sampler::restore), both prompt forms given, a token
  // id outside the vocabulary, an initial state of another geometry, an unknown state_id or both
  // initial states given, an adapter loaded for another geometry; QueueFullError when queue_length
  // requests are already waiting; EngineStoppedError after shutdown() began.
  RequestHandle submit(Request request);
  // Queues several requests at once, all or none: each is checked as submit() checks it (an
  // InputError names the request's index), and a queue without room for all of them throws
  // QueueFullError with nothing queued. Requests queued together are admitted together when
  // max_rows allows (their prompts then share the first passes).
  std::vector<RequestHandle> submit_all(std::vector<Request> requests);
  // Same as handle.cancel().
  void cancel(const RequestHandle& handle);

  // Registers an initial state under `id` (non-empty) for Request::state_id. Throws InputError for
  // an empty id, an id already registered, or a state of another geometry.
  void register_state(const std::string& id, State state);
  std::vector<std::string> state_ids() const;

  // Stops accepting requests (submit() then throws EngineStoppedError); running and queued ones
  // finish normally unless `cancel` is true. Returns when the engine is idle; when `grace` passes
  // first, the rest are cancelled and it returns once they have ended. Never throws.
  void shutdown(std::chrono::milliseconds grace, bool cancel = false);

  EngineStats stats() const;
  const Model& model() const { return model_; }
  const EngineOptions& options() const { return options_; }

  // The cache scope of requests starting from the initial state `init` ("zero", or a registered
  // or given state's content digest) on this engine: the weights' fingerprint, precision,
  // quantisation, attention options, the kernels' ISA and the state format, then the request's
  // adapter (`adapter`: LoraAdapter::fingerprint(), "" for none) and `init`.
  std::string cache_scope(const std::string& init, const std::string& adapter = "") const;

 private:
  struct Row;
  void loop();
  void iterate(std::vector<std::unique_ptr<Row>>& rows);
  void admit(Row& row);
  void begin_decode(Row& row, std::span<const float> logits);
  // Picks the row's next token from `logits`; false when that failed (recorded, the row stopped).
  bool pick(Row& row, std::span<const float> logits);
  // Speculation: the row's draft for this pass (none when off, finished or nothing recurs).
  void plan_draft(Row& row);
  // After a pass: the row's logits rows `out` (every position of pending + draft when it
  // drafted, else the last position) - absorb, verify, pick.
  void after_decode_pass(Row& row, std::span<const float> out);
  // Stores the final (prompt + every returned token) state, the row having absorbed them all.
  void store_final(Row& row, std::span<const float> logits);
  // RWKV-X: a state with `length` cached rows cannot absorb another token.
  bool kv_full_at(int64_t length) const;
  // Ends the row and completes its request; `logits` are those after the row's last absorbed
  // token when known (the result's continuation), else empty.
  void finish(Row& row, std::span<const float> logits = {});
  void store_prefix(Row& row, std::span<const int32_t> tokens, std::span<const float> logits);
  // The adapter the row's passes use: its request's, else the model's own (may be null).
  const LoraAdapter* adapter_of(const Row& row) const;
  void observe_pass(bool any_decode, int64_t prefill_tokens, double ms);
  void mark_failed(Row& row, std::exception_ptr e);
  void fail(Row& row, std::exception_ptr e);
  std::shared_ptr<detail::RequestControl> prepare(Request request) const;
  void enqueue_locked(std::vector<std::shared_ptr<detail::RequestControl>>& ctls);
  void request_ended();
  int64_t latency_budget() const;

  Model model_;
  const Tokenizer& tokenizer_;
  const EngineOptions options_;
  const std::string scope_base_;
  PrefixCache cache_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::vector<std::shared_ptr<detail::RequestControl>> queue_;
  std::map<std::string, std::pair<std::shared_ptr<const State>, std::string>>
      states_;             // id ->
                           // state, content digest
  bool stopping_ = false;  // no new requests
  bool cancel_all_ = false;
  bool quit_ = false;          // engine thread leaves
  int running_ = 0;            // rows held by the engine thread
  int unfinished_ = 0;         // taken from the queue, completion (on_done, waiters) not yet done
  std::vector<float> logits_;  // engine thread: the pass's logits, reused
  double decode_ms_ = 0;       // engine thread: moving average of decode-only passes
  double token_ms_ = 0;        // engine thread: moving average cost of one prefill token
  uint64_t next_id_ = 1;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace wick
