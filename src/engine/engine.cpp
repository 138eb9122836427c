// The engine thread: admission, one mixed batched pass per iteration (decode rows + prefill
// chunks), per-row decoding through the same RowDecoder as generate(), prefix-cache stores.
#include "wick/engine.h"

#include <algorithm>
#include <atomic>

#include "base/sha256.h"
#include "base/timing.h"
#include "engine/request_control.h"
#include "generate/ngram_drafter.h"
#include "generate/row_decoder.h"
#include "model/lora.h"
#include "model/state_geometry.h"
#include "wick/errors.h"

namespace wick {
namespace {

// Content digest of a state (recurrent part and KV caches): the cache scope of requests that
// start from it.
std::string state_digest(const State& s) {
  base::Sha256 h;
  h.update(s.data(), s.size() * sizeof(float));
  const int64_t kv = s.kv_length();
  h.update(&kv, sizeof kv);
  for (int j = 0; j < s.n_attn(); ++j) {
    const size_t n = static_cast<size_t>(kv) * s.n_embd() * sizeof(float);
    if (n == 0) continue;
    h.update(s.k_cache(j), n);
    h.update(s.v_cache(j), n);
  }
  return "sha256:" + h.hex_digest();
}

}  // namespace

std::string_view cache_tier_name(CacheTier t) {
  switch (t) {
    case CacheTier::kNone:
      return "none";
    case CacheTier::kLocal:
      return "local";
    case CacheTier::kSecond:
      return "redis";
  }
  return "none";
}

void EngineOptions::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw InputError("engine options: " + what);
  };
  need(max_rows >= 1, "max_rows must be >= 1, got " + std::to_string(max_rows));
  need(prefill_chunk >= 1, "prefill_chunk must be >= 1, got " + std::to_string(prefill_chunk));
  need(prefill_chunk_idle >= prefill_chunk,
       "prefill_chunk_idle (" + std::to_string(prefill_chunk_idle) +
           ") must be >= prefill_chunk (" + std::to_string(prefill_chunk) + ")");
  need(queue_length >= 1, "queue_length must be >= 1, got " + std::to_string(queue_length));
  need(itl_ratio == 0 || itl_ratio >= 1,
       "itl_ratio must be 0 (off) or >= 1, got " + std::to_string(itl_ratio));
}

// ---------------------------------------------------------------------------------------------
// RequestHandle

uint64_t RequestHandle::id() const {
  return ctl_ ? ctl_->id : 0;
}

bool RequestHandle::done() const {
  if (!ctl_) return false;
  std::lock_guard<std::mutex> lock(ctl_->mutex);
  return ctl_->done;
}

const EngineResult& RequestHandle::wait() const& {
  if (!ctl_) throw InputError("RequestHandle::wait on an empty handle (not from Engine::submit)");
  std::unique_lock<std::mutex> lock(ctl_->mutex);
  ctl_->cv.wait(lock, [&] { return ctl_->done; });
  return ctl_->result;
}

const EngineResult* RequestHandle::wait_for(std::chrono::milliseconds timeout) const {
  if (!ctl_) throw InputError("RequestHandle::wait_for on an empty handle");
  std::unique_lock<std::mutex> lock(ctl_->mutex);
  if (!ctl_->cv.wait_for(lock, timeout, [&] { return ctl_->done; })) return nullptr;
  return &ctl_->result;
}

void RequestHandle::cancel() const {
  if (!ctl_) return;
  // The engine thread never sleeps while a request is queued or running, so the flag is seen at
  // its next iteration.
  ctl_->cancel.store(true);
}

// ---------------------------------------------------------------------------------------------
// One running request.

struct Engine::Row {
  std::shared_ptr<detail::RequestControl> ctl;
  std::string scope;  // cache scope; empty: the cache is not used
  State state;
  size_t absorbed = 0;  // prompt tokens absorbed into `state`
  std::unique_ptr<gen::RowDecoder> decoder;
  bool decoding = false;  // the prompt is absorbed
  // Returned tokens the state has not absorbed yet, oldest first: the one just picked, and with
  // speculation the picks of a pass whose draft was not accepted whole (the next pass absorbs
  // them).
  std::vector<int32_t> pending;
  int steps = 0;  // generated tokens absorbed
  // Speculation (GenerationConfig::speculative): the drafter over prompt + returned tokens (made
  // at the first decode pass), how many returned tokens it has seen, this pass's draft, its
  // tokens (pending + draft) and the copy of `state` it runs on (`state` keeps covering only
  // decided tokens), and the counters.
  std::unique_ptr<gen::NgramDrafter> drafter;
  size_t drafter_seen = 0;
  std::vector<int32_t> draft, seq;
  State trial;
  SpeculativeCounters spec;
  // Back-off: after `misses` drafts in a row of which nothing was accepted, the next `skip`
  // passes take plain steps (1, 2, 4 ... up to 64), the next draft is at most n_max >> misses
  // tokens (at least 1) and needs a recurring suffix of at least 2 + misses tokens (at most 8),
  // so text that does not repeat costs few extra rows.
  int misses = 0, skip = 0;
  int cached = 0;
  CacheTier tier = CacheTier::kNone;
  EngineClock::time_point admitted, prefill_done;
  std::vector<double> token_times;
  bool failed = false;
  std::string error;
  std::exception_ptr exception;
  bool finished = false;
  size_t pass_len = 0;  // tokens this row contributes to the current pass
  size_t out_row = 0;   // its first logits row in the pass's output
};

// ---------------------------------------------------------------------------------------------

Engine::Engine(Model model, const Tokenizer& tokenizer, EngineOptions options,
               std::shared_ptr<Runtime> runtime)
    : model_(runtime ? model.with_runtime(std::move(runtime)) : std::move(model)),
      tokenizer_(tokenizer),
      options_((options.validate(), std::move(options))),
      scope_base_([&] {
        const ModelInfo& info = model_.info();
        const AttentionOptions& a = model_.attention();
        std::string s = "wick-prefix-v1;weights=" + info.fingerprint +
                        ";precision=" + std::string(precision_name(model_.precision())) +
                        ";quantize=" + std::string(weight_quantization_name(info.quantization));
        if (model_.geometry().n_attn > 0)
          s += ";attention=" + std::string(attention_mode_name(a.mode)) + "/" +
               std::to_string(a.moba_block) + "/" + std::to_string(a.moba_topk) + "/" +
               std::string(moba_scope_name(a.moba_scope)) + "/" +
               (a.moba_past_k_minus_1 ? "k-1" : "k");
        // The kernels' instruction set: AVX-512 / AVX2 / scalar sums are each exact for their
        // machine but not the same bits as one another.
        s += std::string(";state_format=2;kernels=") + kernel_isa();
        return s;
      }()),
      cache_(options_.cache_bytes) {
  if (!model_.has_lm_head())
    throw InputError("the engine generates text: this model (" + model_.info().source +
                     ") has no LM head (an embedding backbone)");
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cancel_all_ = true;
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Engine::cache_scope(const std::string& init, const std::string& adapter) const {
  return scope_base_ + (adapter.empty() ? "" : ";adapter=" + adapter) + ";init=" + init;
}

void Engine::register_state(const std::string& id, State state) {
  if (id.empty()) throw InputError("register_state: the state id must not be empty");
  if (!state_fits(state, model_.geometry()))
    throw_state_mismatch(StateGeometry::of(state), model_.geometry(),
                         "register_state '" + id + "': the state");
  std::string digest = state_digest(state);
  std::lock_guard<std::mutex> lock(mutex_);
  if (states_.count(id))
    throw InputError("register_state: a state with id '" + id + "' is already registered");
  states_.emplace(id, std::make_pair(std::make_shared<const State>(std::move(state)), digest));
}

std::vector<std::string> Engine::state_ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, s] : states_) ids.push_back(id);
  return ids;
}

std::shared_ptr<detail::RequestControl> Engine::prepare(Request request) const {
  const int vocab = model_.geometry().vocab;
  request.config.validate(vocab);
  if (!request.prompt.empty() && !request.prompt_tokens.empty())
    throw InputError("a request gives its prompt as text or as token ids, not both");
  auto ctl = std::make_shared<detail::RequestControl>();
  ctl->submitted = EngineClock::now();
  ctl->prompt = request.prompt_tokens.empty() ? tokenizer_.encode(request.prompt)
                                              : std::move(request.prompt_tokens);
  request.prompt_tokens.clear();
  {
    // Boundaries as the loop expects them: ascending, distinct, inside the prompt.
    auto& b = request.cache_boundaries;
    std::sort(b.begin(), b.end());
    b.erase(std::unique(b.begin(), b.end()), b.end());
    std::erase_if(b, [&](size_t n) { return n == 0 || n >= ctl->prompt.size(); });
  }
  const Continuation& from = request.continuation;
  if (from.has_logits() && from.logits.size() != static_cast<size_t>(vocab))
    throw InputError("the continuation's logits have " + std::to_string(from.logits.size()) +
                     " values but this model's vocabulary has " + std::to_string(vocab) +
                     "; they must come from this model");
  if (from.sampler) {
    // Sampler::restore's checks, before anything is queued.
    Sampler probe(request.config.sampling, vocab, [](int32_t) { return std::string(); });
    probe.restore(*from.sampler);
  }
  if (ctl->prompt.empty() && !from.has_logits())
    throw InputError(
        "empty prompt: generation needs at least one token to continue from (there "
        "are no logits before the first token; a state saved by a generation, state "
        "file format 2, carries them)");
  for (size_t i = 0; i < ctl->prompt.size(); ++i)
    if (ctl->prompt[i] < 0 || ctl->prompt[i] >= vocab)
      throw InputError("token id " + std::to_string(ctl->prompt[i]) + " at position " +
                       std::to_string(i) + " is outside this model's vocabulary [0, " +
                       std::to_string(vocab) + "); was the text encoded with another tokenizer?");
  if (request.adapter) model::check_adapter_geometry(*request.adapter, model_.geometry());
  if (request.initial_state && !request.state_id.empty())
    throw InputError("a request starts from a given State or from a registered state id, not both");
  if (request.initial_state) {
    check_state_fits(*request.initial_state, model_.geometry(), "the request's initial state");
    ctl->init_digest = request.use_cache ? state_digest(*request.initial_state) : "";
  } else if (request.state_id.empty()) {
    ctl->init_digest = "zero";
  }
  ctl->request = std::move(request);
  return ctl;
}

// Queues prepared requests, all or none. Caller holds mutex_.
void Engine::enqueue_locked(std::vector<std::shared_ptr<detail::RequestControl>>& ctls) {
  for (auto& ctl : ctls) {
    const std::string& id = ctl->request.state_id;
    if (id.empty()) continue;
    auto it = states_.find(id);
    if (it == states_.end())
      throw InputError("unknown initial state '" + id + "': register it first (" +
                       std::to_string(states_.size()) + " registered)");
    ctl->init = it->second.first;
    ctl->init_digest = "state:" + id + ":" + it->second.second;
  }
  if (stopping_)
    throw EngineStoppedError("the engine is shutting down and accepts no new requests");
  if (queue_.size() + ctls.size() > static_cast<size_t>(options_.queue_length)) {
    stats_.refused += ctls.size();
    throw QueueFullError(
        "the request queue is full (" + std::to_string(queue_.size()) + " waiting, queue_length " +
        std::to_string(options_.queue_length) +
        (ctls.size() > 1 ? ", " + std::to_string(ctls.size()) + " more asked" : std::string()) +
        "): retry later or raise the queue length");
  }
  for (auto& ctl : ctls) {
    ctl->id = next_id_++;
    queue_.push_back(ctl);
    ++stats_.submitted;
  }
}

RequestHandle Engine::submit(Request request) {
  std::vector<std::shared_ptr<detail::RequestControl>> one = {prepare(std::move(request))};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    enqueue_locked(one);
  }
  wake_.notify_all();
  return RequestHandle(one[0]);
}

std::vector<RequestHandle> Engine::submit_all(std::vector<Request> requests) {
  std::vector<std::shared_ptr<detail::RequestControl>> ctls;
  ctls.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    try {
      ctls.push_back(prepare(std::move(requests[i])));
    } catch (const InputError& e) {
      throw InputError("request " + std::to_string(i) + ": " + e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    enqueue_locked(ctls);
  }
  wake_.notify_all();
  std::vector<RequestHandle> handles;
  for (auto& c : ctls) handles.push_back(RequestHandle(c));
  return handles;
}

void Engine::cancel(const RequestHandle& handle) {
  handle.cancel();
}

void Engine::shutdown(std::chrono::milliseconds grace, bool cancel) {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  if (cancel) cancel_all_ = true;
  wake_.notify_all();
  auto all_ended = [&] { return queue_.empty() && unfinished_ == 0; };
  const bool idle = idle_.wait_for(lock, grace, all_ended);
  if (!idle) {
    cancel_all_ = true;
    wake_.notify_all();
    idle_.wait(lock, all_ended);
  }
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats s = stats_;
  s.queued = static_cast<int>(queue_.size());
  s.running = running_;
  s.cache = cache_.stats();
  if (options_.second_tier) {
    s.has_second_tier = true;
    s.second_tier = options_.second_tier->stats();
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Engine thread

namespace {

// Completes a request: result stored, on_done called, waiters woken. Exceptions from on_done are
// swallowed (a callback must not take the engine down).
void complete(detail::RequestControl& ctl, EngineResult result) {
  result.total_ms = base::ms_between(ctl.submitted, EngineClock::now());
  if (ctl.request.on_done) {
    try {
      ctl.request.on_done(result);
    } catch (...) {
    }
  }
  {
    std::lock_guard<std::mutex> lock(ctl.mutex);
    ctl.result = std::move(result);
    ctl.done = true;
  }
  ctl.cv.notify_all();
}

// A request that ends before it got a row (cancelled or past its deadline while queued).
void complete_unstarted(detail::RequestControl& ctl, StopReason reason) {
  EngineResult r;
  r.stop_reason = reason;
  r.prompt_tokens = static_cast<int>(ctl.prompt.size());
  r.queue_ms = base::ms_between(ctl.submitted, EngineClock::now());
  complete(ctl, std::move(r));
}

}  // namespace

void Engine::request_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  --unfinished_;
  if (unfinished_ == 0 && queue_.empty()) idle_.notify_all();
}

// Records a row's failure (what the result reports), without ending the row.
void Engine::mark_failed(Row& row, std::exception_ptr e) {
  row.failed = true;
  row.exception = e;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    row.error = x.what();
  } catch (...) {
    row.error = "a non-standard exception (not derived from std::exception)";
  }
}

void Engine::fail(Row& row, std::exception_ptr e) {
  mark_failed(row, e);
  if (row.decoder) row.decoder->stop(StopReason::kError);
  finish(row);
}

void Engine::loop() {
  std::vector<std::unique_ptr<Row>> rows;
  while (true) {
    std::vector<std::shared_ptr<detail::RequestControl>> admitted, ended;
    std::vector<StopReason> ended_reason;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (rows.empty() && queue_.empty()) {
        if (quit_) break;
        // Sleep until a request arrives (or the earliest queued deadline: none are queued here).
        wake_.wait(lock, [&] { return quit_ || !queue_.empty(); });
        if (quit_ && queue_.empty()) break;
      }
      const auto now = EngineClock::now();
      std::vector<std::shared_ptr<detail::RequestControl>> keep;
      for (auto& q : queue_) {
        if (cancel_all_ || q->cancel.load()) {
          ended.push_back(q);
          ended_reason.push_back(StopReason::kCancelled);
        } else if (now >= q->request.deadline) {
          ended.push_back(q);
          ended_reason.push_back(StopReason::kDeadline);
        } else if (rows.size() + admitted.size() < static_cast<size_t>(options_.max_rows)) {
          admitted.push_back(q);
        } else {
          keep.push_back(q);
        }
      }
      queue_ = std::move(keep);
      if (cancel_all_)
        for (auto& r : rows) r->ctl->cancel.store(true);
      running_ += static_cast<int>(admitted.size());
      unfinished_ += static_cast<int>(admitted.size() + ended.size());
    }
    for (size_t i = 0; i < ended.size(); ++i) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.completed;
      }
      complete_unstarted(*ended[i], ended_reason[i]);
      request_ended();
    }
    for (auto& ctl : admitted) {
      auto row = std::make_unique<Row>();
      row->ctl = std::move(ctl);
      try {
        admit(*row);
      } catch (...) {
        fail(*row, std::current_exception());  // e.g. out of memory copying a state
      }
      rows.push_back(std::move(row));
    }
    try {
      iterate(rows);
    } catch (...) {
      // Nothing in an iteration should throw (rows fail on their own); if something does, every
      // row it held ends with the error rather than the engine thread dying.
      for (auto& r : rows)
        if (!r->finished) fail(*r, std::current_exception());
    }
    rows.erase(std::remove_if(rows.begin(), rows.end(), [](const auto& r) { return r->finished; }),
               rows.end());
  }
}

void Engine::admit(Row& row) {
  detail::RequestControl& ctl = *row.ctl;
  Request& req = ctl.request;
  row.admitted = EngineClock::now();
  row.decoder = std::make_unique<gen::RowDecoder>(req.config, tokenizer_, model_.geometry().vocab,
                                                  ctl.prompt, req.continuation.sampler);
  if (req.initial_state) {
    // Moved, not copied: nothing reads it after admission (a row is admitted once), and a copy
    // of a large state into fresh pages is a page fault per 4 KiB.
    row.state = std::move(*req.initial_state);
    req.initial_state.reset();
  } else if (ctl.init) {
    row.state = *ctl.init;
  } else {
    row.state = model_.new_state();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.prompt_tokens += ctl.prompt.size();
  }
  std::shared_ptr<const CachedPrefix> hit;
  if (req.use_cache && !ctl.init_digest.empty() && !ctl.prompt.empty() &&
      (options_.cache_bytes > 0 || options_.second_tier)) {
    row.scope =
        cache_scope(ctl.init_digest, req.adapter ? req.adapter->fingerprint() : std::string());
    hit = cache_.lookup(row.scope, ctl.prompt);
    if (hit) row.tier = CacheTier::kLocal;
    if (options_.second_tier) {
      const size_t have = hit ? hit->tokens.size() : 0;
      std::vector<size_t> lengths;
      for (size_t n : req.cache_boundaries)
        if (n > have && n < ctl.prompt.size() && (lengths.empty() || n > lengths.back()))
          lengths.push_back(n);
      if (ctl.prompt.size() > have) lengths.push_back(ctl.prompt.size());
      if (!lengths.empty()) {
        std::shared_ptr<const CachedPrefix> far;
        try {
          far = options_.second_tier->fetch(row.scope, ctl.prompt, lengths);
        } catch (...) {
          far = nullptr;  // a failing tier is a miss, never an error
        }
        // Trust nothing: the entry must be this scope, a prefix of the prompt, and fit the model.
        if (far && far->scope == row.scope && far->tokens.size() > have &&
            far->tokens.size() <= ctl.prompt.size() &&
            std::equal(far->tokens.begin(), far->tokens.end(), ctl.prompt.begin()) &&
            state_fits(far->state, model_.geometry()) &&
            far->logits.size() == static_cast<size_t>(model_.geometry().vocab)) {
          hit = far;
          row.tier = CacheTier::kSecond;
          cache_.adopt(far);
        }
      }
    }
  }
  if (hit) {
    row.state = hit->state;
    row.absorbed = hit->tokens.size();
    row.cached = static_cast<int>(row.absorbed);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.cached_tokens += row.absorbed;
  }
  // RWKV-X: a prompt that cannot fit the KV cache is refused as forward() would refuse it.
  const int64_t kv_max = model_.attention().kv_max;
  const int64_t rest = static_cast<int64_t>(ctl.prompt.size() - row.absorbed);
  if (model_.geometry().n_attn > 0 && kv_max > 0 && row.state.kv_length() + rest > kv_max) {
    row.failed = true;
    row.error = "the KV cache holds " + std::to_string(row.state.kv_length()) +
                " tokens and the prompt adds " + std::to_string(rest) +
                ", which passes its limit of " + std::to_string(kv_max) +
                " (kv_max); nothing was changed. Start a new context (a fresh state) or raise the "
                "limit (--kv-max)";
    row.exception = std::make_exception_ptr(ContextFullError(row.error));
    row.decoder->stop(StopReason::kError);
    finish(row);
    return;
  }
  if (row.absorbed == ctl.prompt.size()) {
    row.prefill_done = EngineClock::now();
    // Nothing to prefill: a prompt cached whole, or an empty prompt after a continuation.
    begin_decode(row, hit ? std::span<const float>(hit->logits)
                          : std::span<const float>(req.continuation.logits));
  }
}

void Engine::begin_decode(Row& row, std::span<const float> logits) {
  row.decoding = true;
  if (row.decoder->finished()) return finish(row, logits);  // max_tokens 0
  if (gen::kv_cache_full(model_, row.state)) {
    row.decoder->stop_kv_cache_full();
    return finish(row, logits);
  }
  const size_t before = row.decoder->tokens().size();
  pick(row, logits);
  // A token picked before a callback threw is still absorbed by the next pass (state rule: the
  // state has absorbed every returned token); the row then ends with the error.
  if (row.decoder->tokens().size() > before) {
    row.pending.push_back(row.decoder->tokens().back());
  } else {
    finish(row);
  }
}

bool Engine::pick(Row& row, std::span<const float> logits) {
  try {
    row.decoder->next(logits, row.ctl->request.on_chunk, row.ctl->request.on_logprob);
    row.token_times.push_back(base::ms_between(row.ctl->submitted, EngineClock::now()));
    return true;
  } catch (...) {
    mark_failed(row, std::current_exception());
    row.decoder->stop(StopReason::kError);
    return false;
  }
}

bool Engine::kv_full_at(int64_t length) const {
  const int64_t limit = model_.attention().kv_max;
  return model_.geometry().n_attn > 0 && limit > 0 && length >= limit;
}

void Engine::plan_draft(Row& row) {
  row.draft.clear();
  const int k = row.ctl->request.config.speculative.n_max;
  if (k <= 0 || row.decoder->finished()) return;
  if (row.skip > 0) {
    --row.skip;
    return;
  }
  if (!row.drafter) {
    row.drafter = std::make_unique<gen::NgramDrafter>();
    row.drafter->push(row.ctl->prompt);
  }
  const std::vector<int32_t>& toks = row.decoder->tokens();
  row.drafter->push(std::span<const int32_t>(toks).subspan(row.drafter_seen));
  row.drafter_seen = toks.size();
  // A pass verifies at most the picks left before max_tokens, and (RWKV-X) what the KV cache
  // still holds after the pending tokens.
  int64_t room = row.ctl->request.config.max_tokens - static_cast<int64_t>(toks.size());
  const int64_t kv_max = model_.attention().kv_max;
  if (model_.geometry().n_attn > 0 && kv_max > 0)
    room =
        std::min(room, kv_max - row.state.kv_length() - static_cast<int64_t>(row.pending.size()));
  const int n = static_cast<int>(std::min<int64_t>(std::max(1, k >> row.misses), room));
  // After misses only a longer recurring suffix drafts (text that repeats matches at the longest
  // n; text that does not mostly matches short n-grams, whose drafts fail).
  const int min_n = std::min(gen::NgramDrafter::kMaxN, gen::NgramDrafter::kMinN + row.misses);
  const int used = n > 0 ? row.drafter->draft(n, row.draft, min_n) : 0;
  if (used == 0) return;
  // A short recurring suffix is weak evidence: it drafts 2^(n-2) tokens at most (1 for a
  // bigram), so a failed guess costs one extra row, not k.
  const size_t cap = size_t{1} << std::min(used - gen::NgramDrafter::kMinN, 6);
  if (row.draft.size() > cap) row.draft.resize(cap);
  row.seq.assign(row.pending.begin(), row.pending.end());
  row.seq.insert(row.seq.end(), row.draft.begin(), row.draft.end());
  row.trial = row.state;
}

void Engine::store_final(Row& row, std::span<const float> logits) {
  if (row.scope.empty()) return;
  std::vector<int32_t> all = row.ctl->prompt;
  const auto& gen = row.decoder->tokens();
  all.insert(all.end(), gen.begin(), gen.end());
  store_prefix(row, all, logits);
}

void Engine::after_decode_pass(Row& row, std::span<const float> out) {
  const size_t V = static_cast<size_t>(model_.geometry().vocab);
  const size_t np = row.pending.size(), nd = row.draft.size();
  ++row.spec.passes;
  if (nd == 0) {
    // A plain step (or the pending picks of a rejected draft): the state absorbed them.
    row.steps += static_cast<int>(np);
    row.pending.clear();
    const std::span<const float> last = out.last(V);
    if (row.decoder->finished()) {
      store_final(row, last);
      return finish(row, last);
    }
    return begin_decode(row, last);
  }
  // Verification: position np - 1 + j holds the logits after draft[0..j); the row's sampler picks
  // from them in order, exactly as plain decoding would after absorbing those tokens, until a
  // pick differs from the draft (that pick is kept too) or the row stops.
  const size_t before = row.decoder->tokens().size();
  for (size_t j = 0; j <= nd && !row.decoder->finished(); ++j) {
    if (kv_full_at(row.state.kv_length() + static_cast<int64_t>(np + j))) {
      row.decoder->stop_kv_cache_full();
      break;
    }
    if (!pick(row, out.subspan((np - 1 + j) * V, V))) break;
    if (j == nd || row.decoder->tokens().back() != row.draft[j]) break;
  }
  const std::vector<int32_t>& toks = row.decoder->tokens();
  const std::span<const int32_t> decided(toks.data() + before, toks.size() - before);
  size_t accepted = 0;
  while (accepted < nd && accepted < decided.size() && decided[accepted] == row.draft[accepted])
    ++accepted;
  row.spec.drafted += static_cast<int>(nd);
  row.spec.accepted += static_cast<int>(accepted);
  if (accepted == 0) {
    row.misses = std::min(row.misses + 1, 7);
    row.skip = 1 << (row.misses - 1);
  } else {
    row.misses = 0;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.spec_drafted += nd;
    stats_.spec_accepted += accepted;
  }
  std::span<const float> last;
  if (accepted == nd) {
    // The whole draft was decided: the pass's state covers pending + draft.
    std::swap(row.state, row.trial);
    row.steps += static_cast<int>(np + nd);
    row.pending.assign(decided.begin() + static_cast<std::ptrdiff_t>(nd), decided.end());
    last = out.subspan((np + nd - 1) * V, V);
  } else {
    // The pass ran past the decided tokens: `state` stays, the next pass absorbs them.
    row.pending.insert(row.pending.end(), decided.begin(), decided.end());
  }
  if (row.decoder->finished() && row.pending.empty()) {
    store_final(row, last);
    finish(row, last);
  }
}

void Engine::store_prefix(Row& row, std::span<const int32_t> tokens,
                          std::span<const float> logits) {
  if (row.scope.empty() || tokens.empty() || row.failed) return;
  std::shared_ptr<const CachedPrefix> entry;
  try {
    entry = cache_.insert(row.scope, tokens, row.state, logits);
    if (!entry && options_.second_tier) {
      // The local tier is off or too small for it: the second tier still gets the entry.
      auto e = std::make_shared<CachedPrefix>();
      e->scope = row.scope;
      e->tokens.assign(tokens.begin(), tokens.end());
      e->state = row.state;
      e->logits.assign(logits.begin(), logits.end());
      entry = std::move(e);
    }
  } catch (const std::bad_alloc&) {
    return;  // a cache entry is an optimisation: out of memory skips it
  }
  if (entry && options_.second_tier) {
    try {
      options_.second_tier->store(std::move(entry));
    } catch (...) {
    }
  }
}

void Engine::finish(Row& row, std::span<const float> logits) {
  if (row.finished) return;
  row.finished = true;
  detail::RequestControl& ctl = *row.ctl;
  EngineResult r;
  if (row.decoder) {
    try {
      static_cast<GenerationResult&>(r) =
          row.decoder->finish(row.failed || !row.decoding ? ChunkCallback() : ctl.request.on_chunk);
      r.continuation.sampler = row.decoder->sampler_snapshot();
      if (!row.failed) r.continuation.logits.assign(logits.begin(), logits.end());
    } catch (...) {
      mark_failed(row, std::current_exception());
    }
  }
  if (row.failed) {
    r.stop_reason = StopReason::kError;
    r.error = row.error;
    r.exception = row.exception;
  }
  r.prompt_tokens = static_cast<int>(ctl.prompt.size());
  r.cached_tokens = row.cached;
  r.cache_tier = row.tier;
  const auto now = EngineClock::now();
  r.queue_ms = base::ms_between(ctl.submitted, row.admitted);
  r.ttft_ms = row.token_times.empty() ? 0 : row.token_times.front();
  r.token_times_ms = std::move(row.token_times);
  if (row.decoding) {
    r.timings.prefill_ms = base::ms_between(row.admitted, row.prefill_done);
    r.timings.decode_ms = base::ms_between(row.prefill_done, now);
  } else {
    r.timings.prefill_ms = base::ms_between(row.admitted, now);
  }
  r.timings.decode_steps = row.steps;
  if (ctl.request.config.speculative.enabled()) r.speculative = row.spec;
  r.state = std::move(row.state);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.completed;
    --running_;
  }
  complete(ctl, std::move(r));
  request_ended();
}

// Pass-time model for the latency budget: t(pass) ~ t_decode + prefill_tokens * t_token, with
// t_decode from decode-only passes and t_token from passes that mixed in prefill (moving
// averages; only timing, never results, depends on them).
void Engine::observe_pass(bool any_decode, int64_t prefill_tokens, double ms) {
  constexpr double kAlpha = 0.2;
  if (any_decode && prefill_tokens == 0) {
    decode_ms_ = decode_ms_ > 0 ? (1 - kAlpha) * decode_ms_ + kAlpha * ms : ms;
  } else if (prefill_tokens > 0) {
    const double base = any_decode ? decode_ms_ : 0;
    const double per = std::max(0.0, ms - base) / static_cast<double>(prefill_tokens);
    token_ms_ = token_ms_ > 0 ? (1 - kAlpha) * token_ms_ + kAlpha * per : per;
  }
}

const LoraAdapter* Engine::adapter_of(const Row& row) const {
  const auto& own = row.ctl->request.adapter;
  return own ? own.get() : model_.adapter().get();
}

int64_t Engine::latency_budget() const {
  // Until both costs are measured, a small chunk (it measures them).
  if (decode_ms_ <= 0 || token_ms_ <= 0) return std::min<int64_t>(options_.prefill_chunk, 16);
  const double fit = std::clamp((options_.itl_ratio - 1) * decode_ms_ / token_ms_, 1.0,
                                static_cast<double>(options_.prefill_chunk));
  return static_cast<int64_t>(fit);
}

void Engine::iterate(std::vector<std::unique_ptr<Row>>& rows) {
  const auto it_start = EngineClock::now();
  // Cancels and deadlines. A decoding row still absorbs the token it returned (state rule).
  for (auto& r : rows) {
    if (r->finished) continue;
    StopReason why;
    if (r->ctl->cancel.load()) {
      why = StopReason::kCancelled;
    } else if (it_start >= r->ctl->request.deadline) {
      why = StopReason::kDeadline;
    } else {
      continue;
    }
    if (!r->decoding) {
      r->decoder->stop(why);
      finish(*r);
    } else if (!r->decoder->finished()) {
      r->decoder->stop(why);
      if (r->pending.empty()) finish(*r);
    }
  }

  // The pass: every decode row's pending tokens (plus its draft, when speculating), then prefill
  // chunks within the budget (in admission order).
  std::vector<Row*> pass;
  std::vector<std::span<const int32_t>> seqs;
  std::vector<State*> states;
  std::vector<const LoraAdapter*> adapters;  // each row's (per-sequence adapters)
  bool any_decode = false, any_draft = false;
  for (auto& r : rows) {
    if (r->finished || !r->decoding || r->pending.empty()) continue;
    plan_draft(*r);
    const bool drafted = !r->draft.empty();
    any_draft = any_draft || drafted;
    r->pass_len = drafted ? r->seq.size() : r->pending.size();
    pass.push_back(r.get());
    seqs.emplace_back(drafted ? r->seq : r->pending);
    states.push_back(drafted ? &r->trial : &r->state);
    adapters.push_back(adapter_of(*r));
    any_decode = true;
  }
  const size_t n_decode = pass.size();
  int64_t budget = any_decode ? options_.prefill_chunk : options_.prefill_chunk_idle;
  if (any_decode && options_.itl_ratio >= 1) budget = std::min(budget, latency_budget());
  for (auto& r : rows) {
    if (budget <= 0) break;
    if (r->finished || r->decoding) continue;
    int64_t rest = static_cast<int64_t>(r->ctl->prompt.size() - r->absorbed);
    // A chunk ends at the next message boundary, where the state is stored (Request).
    if (!r->scope.empty())
      for (size_t b : r->ctl->request.cache_boundaries)
        if (b > r->absorbed && b < r->ctl->prompt.size()) {
          rest = static_cast<int64_t>(b - r->absorbed);
          break;
        }
    const int64_t n = std::min(rest, budget);
    budget -= n;
    r->pass_len = static_cast<size_t>(n);
    pass.push_back(r.get());
    seqs.emplace_back(r->ctl->prompt.data() + r->absorbed, static_cast<size_t>(n));
    states.push_back(&r->state);
    adapters.push_back(adapter_of(*r));
  }
  if (pass.empty()) return;

  // Logits rows: one per row (its last position); when a draft is verified, the decode rows give
  // every position (all_positions) and the prefill chunks, computed in a second pass, only their
  // last (the head is not run over whole prompt chunks). Rows never see each other, so how the
  // rows are split over passes does not change any result.
  size_t out_rows = 0, decode_rows = 0;
  for (size_t i = 0; i < pass.size(); ++i) {
    pass[i]->out_row = out_rows;
    out_rows += any_draft && i < n_decode ? pass[i]->pass_len : 1;
    if (i + 1 == n_decode) decode_rows = out_rows;
  }
  const size_t V = static_cast<size_t>(model_.geometry().vocab);
  // Logits of the pass in a buffer kept between iterations (grown, never shrunk).
  if (logits_.size() < out_rows * V) logits_.resize(out_rows * V);
  const std::span<float> logits(logits_.data(), out_rows * V);
  const auto p0 = EngineClock::now();
  try {
    // Requests that bring their own adapter take the per-sequence overload (each row with its
    // adapter); otherwise every row runs with the model's own.
    const bool own_adapters =
        std::any_of(pass.begin(), pass.end(), [](const Row* r) { return r->ctl->request.adapter; });
    const std::span<const std::span<const int32_t>> all_seqs(seqs);
    const std::span<State* const> all_states(states);
    const std::span<const LoraAdapter* const> all_adapters(adapters);
    auto run = [&](size_t first, size_t count, std::span<float> out, bool all_positions) {
      if (own_adapters)
        model_.forward_batch(all_seqs.subspan(first, count), all_states.subspan(first, count),
                             all_adapters.subspan(first, count), out, all_positions);
      else
        model_.forward_batch(all_seqs.subspan(first, count), all_states.subspan(first, count), out,
                             all_positions);
    };
    if (!any_draft) {
      run(0, pass.size(), logits, false);
    } else {
      run(0, n_decode, logits.first(decode_rows * V), /*all_positions=*/true);
      if (pass.size() > n_decode)
        run(n_decode, pass.size() - n_decode, logits.subspan(decode_rows * V), false);
    }
  } catch (...) {
    // Input errors are found before any state changes; anything else (out of memory inside the
    // pass) may leave these rows' states part-advanced. Either way these rows end with it.
    const std::exception_ptr e = std::current_exception();
    for (Row* r : pass) fail(*r, e);
    return;
  }
  const double pass_ms = base::ms_between(p0, EngineClock::now());
  int64_t prefill_tokens = 0;
  size_t tokens = 0;
  for (Row* r : pass) {
    tokens += r->pass_len;
    if (!r->decoding) prefill_tokens += static_cast<int64_t>(r->pass_len);
  }
  observe_pass(any_decode, prefill_tokens, pass_ms);
  {
    // Counted before any row of this pass completes (a waiter reading stats() sees this pass).
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.iterations;
    stats_.pass_rows += pass.size();
    stats_.pass_tokens += static_cast<uint64_t>(tokens);
    stats_.pass_ms += pass_ms;
  }
  for (size_t i = 0; i < pass.size(); ++i) {
    Row& r = *pass[i];
    const size_t n_out = any_draft && i < n_decode ? r.pass_len : 1;
    const std::span<const float> row_out(logits.data() + r.out_row * V, n_out * V);
    const std::span<const float> row_logits = row_out.last(V);
    if (r.decoding) {
      after_decode_pass(r, row_out);
    } else {
      r.absorbed += r.pass_len;
      if (r.absorbed < r.ctl->prompt.size()) {
        const auto& bounds = r.ctl->request.cache_boundaries;
        if (!r.scope.empty() && std::find(bounds.begin(), bounds.end(), r.absorbed) != bounds.end())
          store_prefix(r, std::span<const int32_t>(r.ctl->prompt).first(r.absorbed), row_logits);
        continue;
      }
      r.prefill_done = EngineClock::now();
      store_prefix(r, r.ctl->prompt, row_logits);
      begin_decode(r, row_logits);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.busy_ms += base::ms_between(it_start, EngineClock::now());
}

}  // namespace wick
