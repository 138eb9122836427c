// The serving engine (wick/engine.h): per-row semantics equal generate_tokens(), batch invariance
// under random arrivals and prefill budgets, cancel / deadline / queue limits, the prefix cache
// (hit == miss bit for bit, scopes never mix, a second tier), two engines at once, a soak.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "engine_test_helpers.h"
#include "test_util.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

using namespace std::chrono_literals;

const Model& tiny() {
  static const Model m = Model::load_default();
  return m;
}

const Model& world_model() {
  static const Model m = synthetic_model("2:128", DType::F32, 11);
  return m;
}

const Tokenizer& world_tok() {
  static const std::unique_ptr<Tokenizer> t = default_world_tokenizer();
  return *t;
}

GenerationConfig config_for(uint64_t seed, int max_tokens, bool sampled) {
  return generation_config(seed, max_tokens, sampled);
}

// The state after `prompt` then `generated` from a zero state (what the state rule promises).
State state_after(std::vector<int32_t> prompt, const std::vector<int32_t>& generated) {
  State s = tiny().new_state();
  prompt.insert(prompt.end(), generated.begin(), generated.end());
  tiny().forward(prompt, s);
  return s;
}

void expect_same(const Solo& solo, const EngineResult& got, const std::string& streamed,
                 const std::string& what) {
  EXPECT_EQ(got.tokens, solo.result.tokens) << what;
  EXPECT_EQ(got.text, solo.result.text) << what;
  EXPECT_EQ(got.stop_reason, solo.result.stop_reason) << what;
  EXPECT_EQ(got.stop_token, solo.result.stop_token) << what;
  EXPECT_EQ(got.stop_string, solo.result.stop_string) << what;
  EXPECT_EQ(streamed, solo.streamed) << what;
  EXPECT_TRUE(got.state == solo.state) << what;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int vocab_lo, int vocab_hi, int len) {
  std::uniform_int_distribution<int32_t> id(vocab_lo, vocab_hi);
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (auto& t : p) t = id(rng);
  return p;
}

TEST(Engine, OneRequestEqualsGenerateTokens) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  const std::vector<int32_t> prompt = tok.encode("Once upon a time");
  for (bool sampled : {false, true}) {
    GenerationConfig c = config_for(7, 24, sampled);
    c.stop_strings = {"zzz"};
    const Solo solo = run_solo(tiny(), tok, prompt, c);
    std::string streamed;
    const EngineResult& got = submit_streamed(engine, prompt, c, &streamed, false).wait();
    expect_same(solo, got, streamed, sampled ? "sampled" : "greedy");
    EXPECT_EQ(got.prompt_tokens, static_cast<int>(prompt.size()));
    EXPECT_EQ(got.cached_tokens, 0);
    EXPECT_EQ(got.timings.decode_steps, 24);
    EXPECT_EQ(got.token_times_ms.size(), 24u);
  }
  // A different prompt gives a different result (the comparison above can fail).
  const Solo a = run_solo(tiny(), tok, tok.encode("Once upon a time"), config_for(1, 16, true));
  const Solo b = run_solo(tiny(), tok, tok.encode("The quick brown"), config_for(1, 16, true));
  EXPECT_NE(a.result.tokens, b.result.tokens);
  EXPECT_FALSE(a.state == b.state);
}

// Random prompts, configs, arrival gaps and prefill budgets: every request equals its solo run.
void check_invariance(const Model& m, const Tokenizer& tok, int lo, int hi, uint64_t seed,
                      bool stop_strings) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  struct Case {
    std::vector<int32_t> prompt;
    GenerationConfig config;
    Solo solo;
  };
  std::vector<Case> cases(16);
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    c.prompt = random_prompt(rng, lo, hi, 1 + static_cast<int>(rng() % 90));
    c.config = config_for(seed * 100 + i, 1 + static_cast<int>(rng() % 20), i % 2 == 1);
    if (stop_strings && i % 3 == 0) c.config.stop_strings = {"e", "\n"};
    if (i % 5 == 0) c.config.stop_tokens = {static_cast<int32_t>(lo + (rng() % 8))};
    c.solo = run_solo(m, tok, c.prompt, c.config);
  }
  for (int round = 0; round < 3; ++round) {
    EngineOptions o;
    o.max_rows = 1 + static_cast<int>(rng() % 16);
    o.prefill_chunk = 1 + static_cast<int>(rng() % 40);
    o.prefill_chunk_idle = o.prefill_chunk + static_cast<int>(rng() % 100);
    o.cache_bytes = 0;  // the cache has its own tests; here every token is computed
    Engine engine(m, tok, o);
    std::vector<RequestHandle> handles(cases.size());
    std::vector<std::string> streamed(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      handles[i] = submit_streamed(engine, cases[i].prompt, cases[i].config, &streamed[i]);
    }
    for (size_t i = 0; i < cases.size(); ++i)
      expect_same(cases[i].solo, handles[i].wait(), streamed[i],
                  "round " + std::to_string(round) + " request " + std::to_string(i) +
                      " max_rows " + std::to_string(o.max_rows) + " chunk " +
                      std::to_string(o.prefill_chunk));
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.completed, cases.size());
    EXPECT_EQ(st.running, 0);
  }
}

TEST(Engine, BatchInvarianceTinyModel) { check_invariance(tiny(), ByteTokenizer(), 32, 126, 3, true); }

TEST(Engine, BatchInvarianceWorldModel) {
  check_invariance(world_model(), world_tok(), 1, 30000, 5, true);
}

TEST(Engine, SubmitRefusesBadRequestsAtOnce) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  Request r;
  EXPECT_THROW(engine.submit(r), InputError);  // empty prompt
  r.prompt = "ab";
  r.prompt_tokens = {1, 2};
  EXPECT_THROW(engine.submit(r), InputError);  // both forms
  r.prompt.clear();
  r.prompt_tokens = {1, 999};
  EXPECT_THROW(engine.submit(r), InputError);  // id outside the vocabulary
  r.prompt_tokens = {1, 2};
  r.config.max_tokens = -1;
  EXPECT_THROW(engine.submit(r), InputError);
  r.config.max_tokens = 4;
  r.state_id = "nope";
  EXPECT_THROW(engine.submit(r), InputError);
  r.state_id.clear();
  r.initial_state = world_model().new_state();  // another geometry
  EXPECT_THROW(engine.submit(r), InputError);
  r.initial_state.reset();
  EXPECT_EQ(engine.submit(r).wait().generated_tokens, 4);
  EXPECT_THROW(Engine(tiny(), tok, EngineOptions{.max_rows = 0}), InputError);
}

TEST(Engine, InitialStatesGivenAndRegistered) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  State warm = tiny().new_state();
  tiny().forward(tok.encode("Background: dragons. "), warm);
  engine.register_state("dragons", warm);
  EXPECT_THROW(engine.register_state("dragons", warm), InputError);
  const std::vector<int32_t> prompt = tok.encode("Story:");
  const GenerationConfig c = config_for(3, 12, true);
  State ref = warm;
  const GenerationResult expect = generate_tokens(tiny(), tok, prompt, c, ref);
  for (int via_id = 0; via_id < 2; ++via_id) {
    for (int again = 0; again < 2; ++again) {  // the second time from the cache
      Request r;
      r.prompt_tokens = prompt;
      r.config = c;
      if (via_id) r.state_id = "dragons";
      else r.initial_state = warm;
      const EngineResult& got = engine.submit(std::move(r)).wait();
      EXPECT_EQ(got.tokens, expect.tokens);
      EXPECT_TRUE(got.state == ref);
      EXPECT_EQ(got.cached_tokens, again ? static_cast<int>(prompt.size()) : 0) << via_id;
    }
  }
  // From a zero state the same prompt differs, and never hits the entries above.
  Request z;
  z.prompt_tokens = prompt;
  z.config = c;
  const EngineResult& zero = engine.submit(std::move(z)).wait();
  EXPECT_NE(zero.tokens, expect.tokens);
  EXPECT_EQ(zero.cached_tokens, 0);
}

// A request continuing a state with its continuation (logits + sampler) and an empty prompt
// equals the second half of one uninterrupted generation, alone and beside other rows; a bad
// continuation is refused at submit.
TEST(Engine, EmptyPromptContinuesFromTheGivenLogitsAndSampler) {
  ByteTokenizer tok;
  const std::vector<int32_t> prompt = tok.encode("A dragon");
  GenerationConfig c = config_for(21, 16, true);
  c.sampling.presence_penalty = 0.4f;
  State whole_state = tiny().new_state();
  const GenerationResult whole = generate_tokens(tiny(), tok, prompt, c, whole_state);
  c.max_tokens = 7;
  State half = tiny().new_state();
  const GenerationResult first = generate_tokens(tiny(), tok, prompt, c, half);
  c.max_tokens = 9;
  Engine engine(tiny(), tok, EngineOptions{});
  auto continue_request = [&] {
    Request r;
    r.config = c;
    r.initial_state = half;
    r.continuation = first.continuation;
    return r;
  };
  Request other;
  other.prompt_tokens = tok.encode("Another row runs beside it");
  other.config = config_for(4, 12, true);
  std::vector<Request> both;
  both.push_back(continue_request());
  both.push_back(std::move(other));
  const std::vector<RequestHandle> hs = engine.submit_all(std::move(both));
  const RequestHandle alone = engine.submit(continue_request());
  for (const EngineResult* got : {&alone.wait(), &hs[0].wait()}) {
    std::vector<int32_t> joined = first.tokens;
    joined.insert(joined.end(), got->tokens.begin(), got->tokens.end());
    EXPECT_EQ(joined, whole.tokens);
    EXPECT_TRUE(got->state == whole_state);
    EXPECT_EQ(got->continuation.logits, whole.continuation.logits);
    EXPECT_EQ(got->prompt_tokens, 0);
  }
  // A fresh sampler (no snapshot) at the same seed draws otherwise.
  Request fresh = continue_request();
  fresh.continuation.sampler.reset();
  EXPECT_NE(engine.submit(std::move(fresh)).wait().tokens,
            std::vector<int32_t>(whole.tokens.begin() + 7, whole.tokens.end()));
  // Refused at once: no logits, logits of another size, a sampler of another mode.
  Request none = continue_request();
  none.continuation.logits.clear();
  EXPECT_THROW(engine.submit(std::move(none)), InputError);
  Request wrong = continue_request();
  wrong.continuation.logits.resize(10);
  EXPECT_THROW(engine.submit(std::move(wrong)), InputError);
  Request mode = continue_request();
  mode.continuation.sampler->mode = SamplerMode::kChatRwkv;
  EXPECT_THROW(engine.submit(std::move(mode)), InputError);
}

// A latch a callback can wait on (tests only: real callbacks must not block).
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false, reached = false;
  void wait_reached() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return reached; });
  }
  void release() {
    std::lock_guard<std::mutex> l(m);
    open = true;
    cv.notify_all();
  }
  void arrive_and_wait() {
    std::unique_lock<std::mutex> l(m);
    reached = true;
    cv.notify_all();
    cv.wait(l, [&] { return open; });
  }
};

TEST(Engine, QueueFullIsRefusedAtOnce) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{.max_rows = 1, .queue_length = 1});
  Gate gate;
  Request a;
  a.prompt = "hold";
  a.config = config_for(1, 3, false);
  a.on_chunk = [&](std::string_view, int32_t) {
    gate.arrive_and_wait();
    return true;
  };
  RequestHandle ha = engine.submit(std::move(a));
  gate.wait_reached();  // a is running, the queue is empty
  Request b;
  b.prompt = "queued";
  b.config = config_for(1, 2, false);
  RequestHandle hb = engine.submit(b);
  EXPECT_THROW(engine.submit(b), QueueFullError);
  gate.release();
  EXPECT_EQ(ha.wait().generated_tokens, 3);
  EXPECT_EQ(hb.wait().generated_tokens, 2);
  EXPECT_EQ(engine.stats().refused, 1u);
  EXPECT_NO_THROW(engine.submit(b).wait());  // room again
}

TEST(Engine, CancelBeforeDuringAndAfter) {
  ByteTokenizer tok;
  const std::vector<int32_t> pa = tok.encode("Runner A keeps going");
  const GenerationConfig ca = config_for(9, 30, true);
  const Solo solo_a = run_solo(tiny(), tok, pa, ca);
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 40; ++i) {
    const auto t = tok.encode("a long prompt in prefill, ");
    long_prompt.insert(long_prompt.end(), t.begin(), t.end());
  }
  for (int mode = 0; mode < 3; ++mode) {  // 0: B queued, 1: B in prefill, 2: B decoding
    EngineOptions o;
    o.max_rows = mode == 0 ? 1 : 4;
    o.prefill_chunk = 8;
    o.prefill_chunk_idle = 8;
    o.cache_bytes = 0;
    // What the callback touches outlives the engine (declared first, destroyed last).
    std::mutex hb_mutex;
    std::condition_variable hb_set;
    RequestHandle hb;
    std::string streamed_a;
    int a_tokens = 0;
    Engine engine(tiny(), tok, o);
    Request a;
    a.prompt_tokens = pa;
    a.config = ca;
    a.on_chunk = [&](std::string_view chunk, int32_t) {
      streamed_a += chunk;
      if (++a_tokens == 5) {  // on the engine thread, between passes
        std::unique_lock<std::mutex> l(hb_mutex);
        hb_set.wait(l, [&] { return hb.valid(); });
        hb.cancel();
      }
      return true;
    };
    Request b;
    b.prompt_tokens = mode == 1 ? long_prompt : tok.encode("B");
    b.config = config_for(2, 200, false);
    RequestHandle ha = engine.submit(std::move(a));
    {
      std::lock_guard<std::mutex> l(hb_mutex);
      hb = engine.submit(b);
    }
    hb_set.notify_all();
    const EngineResult& rb = hb.wait();
    const EngineResult& ra = ha.wait();
    expect_same(solo_a, ra, streamed_a, "A, mode " + std::to_string(mode));
    EXPECT_EQ(rb.stop_reason, StopReason::kCancelled) << mode;
    if (mode == 0) {
      EXPECT_TRUE(rb.tokens.empty());
      EXPECT_TRUE(rb.state.empty());  // never started
    }
    if (mode == 1) {
      EXPECT_TRUE(rb.tokens.empty());
      EXPECT_FALSE(rb.state == tiny().new_state());  // part of the prompt was absorbed
    }
    if (mode == 2) {
      // Its tokens are a prefix of its solo run and its state absorbed every one of them.
      const Solo solo_b = run_solo(tiny(), tok, b.prompt_tokens, b.config);
      ASSERT_FALSE(rb.tokens.empty());
      ASSERT_LT(rb.tokens.size(), solo_b.result.tokens.size());
      EXPECT_TRUE(std::equal(rb.tokens.begin(), rb.tokens.end(), solo_b.result.tokens.begin()));
      EXPECT_TRUE(rb.state == state_after(b.prompt_tokens, rb.tokens));
    }
    hb.cancel();  // after completion: nothing happens
    EXPECT_EQ(hb.wait().stop_reason, StopReason::kCancelled);
  }
}

TEST(Engine, DeadlineEndsARequest) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  Request past;
  past.prompt = "late";
  past.deadline = EngineClock::now() - 1ms;
  const EngineResult& r0 = engine.submit(past).wait();
  EXPECT_EQ(r0.stop_reason, StopReason::kDeadline);
  EXPECT_TRUE(r0.tokens.empty());
  Request slow;
  slow.prompt = "slow";
  slow.config = config_for(1, 100000, false);
  slow.deadline = EngineClock::now() + 60ms;
  slow.on_chunk = [](std::string_view, int32_t) {
    std::this_thread::sleep_for(2ms);
    return true;
  };
  const EngineResult& r1 = engine.submit(slow).wait();
  EXPECT_EQ(r1.stop_reason, StopReason::kDeadline);
  ASSERT_FALSE(r1.tokens.empty());
  EXPECT_TRUE(r1.state == state_after(tok.encode("slow"), r1.tokens));  // every token absorbed
}

TEST(Engine, CallbackErrorsEndOnlyTheirRow) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  Request bad;
  bad.prompt = "boom";
  bad.config = config_for(1, 10, false);
  bad.on_chunk = [](std::string_view, int32_t) -> bool { throw std::runtime_error("client gone"); };
  bad.on_done = [](const EngineResult&) { throw std::runtime_error("ignored"); };
  Request good;
  good.prompt = "fine";
  good.config = config_for(1, 10, false);
  RequestHandle hb = engine.submit(bad), hg = engine.submit(good);
  EXPECT_EQ(hb.wait().stop_reason, StopReason::kError);
  EXPECT_NE(hb.wait().error.find("client gone"), std::string::npos);
  EXPECT_EQ(hg.wait().generated_tokens, 10);
}

TEST(Engine, CacheHitEqualsMissBitForBit) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{.prefill_chunk = 16, .prefill_chunk_idle = 16});
  const std::vector<int32_t> p = tok.encode("System: you are helpful.\n\nUser: hi\n\nAssistant:");
  const GenerationConfig c = config_for(5, 16, true);
  const Solo solo = run_solo(tiny(), tok, p, c);
  std::string s1, s2;
  const EngineResult& miss = submit_streamed(engine, p, c, &s1).wait();
  expect_same(solo, miss, s1, "miss");
  EXPECT_EQ(miss.cached_tokens, 0);
  EXPECT_EQ(miss.cache_tier, CacheTier::kNone);
  const EngineResult& hit = submit_streamed(engine, p, c, &s2).wait();  // wholly cached
  expect_same(solo, hit, s2, "hit");
  EXPECT_EQ(hit.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(hit.cache_tier, CacheTier::kLocal);
  // A longer prompt starts from the longest cached prefix: the generation end of the first reply.
  std::vector<int32_t> longer = p;
  longer.insert(longer.end(), miss.tokens.begin(), miss.tokens.end());
  const std::vector<int32_t> more = tok.encode("\n\nUser: and then?\n\nAssistant:");
  longer.insert(longer.end(), more.begin(), more.end());
  const Solo solo2 = run_solo(tiny(), tok, longer, c);
  std::string s3;
  const EngineResult& r3 = submit_streamed(engine, longer, c, &s3).wait();
  expect_same(solo2, r3, s3, "continued");
  EXPECT_EQ(r3.cached_tokens, static_cast<int>(p.size() + miss.tokens.size()));
  // Without the cache flag nothing is reused.
  std::string s4;
  EXPECT_EQ(submit_streamed(engine, p, c, &s4, false).wait().cached_tokens, 0);
  const EngineStats st = engine.stats();
  EXPECT_GE(st.cache.hits, 2u);
  EXPECT_GT(st.cached_tokens, 0u);
}

TEST(Engine, MessageBoundariesAreStoredAndReused) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{.prefill_chunk = 64, .prefill_chunk_idle = 64});
  const std::string system = "System: you are a helpful assistant who answers briefly.\n\n";
  const GenerationConfig c = config_for(9, 8, true);
  auto ask = [&](const std::string& user, bool use_cache) {
    Request r;
    r.prompt = system + "User: " + user + "\n\nAssistant:";
    r.config = c;
    r.use_cache = use_cache;
    r.cache_boundaries = {system.size(), 0, system.size(), 100000};  // cleaned by submit()
    return engine.submit(std::move(r)).wait();
  };
  const EngineResult first = ask("hello", true);
  EXPECT_EQ(first.cached_tokens, 0);
  // Another user message after the same system prompt starts at the stored boundary ...
  const EngineResult second = ask("what is RWKV?", true);
  EXPECT_EQ(second.cached_tokens, static_cast<int>(system.size()));
  // ... and gives what the uncached run gives, bit for bit.
  const EngineResult plain = ask("what is RWKV?", false);
  EXPECT_EQ(plain.cached_tokens, 0);
  EXPECT_EQ(second.tokens, plain.tokens);
  EXPECT_TRUE(second.state == plain.state);
  EXPECT_FALSE(second.state == first.state) << "different prompts, same state";
}

TEST(Engine, LogprobsAreTheLogSoftmaxOfTheAdjustedLogits) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok);
  const std::vector<int32_t> p = tok.encode("The quick brown fox");
  GenerationConfig c = config_for(3, 4, true);
  c.logprobs = 5;
  c.sampling.presence_penalty = 0.5f;
  c.sampling.logit_bias = {{32, 2.0f}};
  std::vector<TokenLogprob> streamed;
  Request r;
  r.prompt_tokens = p;
  r.config = c;
  r.on_logprob = [&](const TokenLogprob& lp) { streamed.push_back(lp); };
  const EngineResult res = engine.submit(std::move(r)).wait();
  ASSERT_EQ(res.logprobs.size(), res.tokens.size());
  ASSERT_EQ(streamed.size(), res.tokens.size());
  // Recompute each token's distribution: the model's logits, adjusted by a sampler with the same
  // history, log-softmax in double.
  State s = tiny().new_state();
  std::vector<float> logits = tiny().forward(p, s);
  Sampler sampler(c.sampling, tiny().geometry().vocab);
  for (size_t i = 0; i < res.tokens.size(); ++i) {
    const std::vector<float> adj = sampler.adjusted_logits(logits);
    double m = -1e300, sum = 0;
    for (float z : adj) m = std::max(m, double(z));
    for (float z : adj) sum += std::exp(double(z) - m);
    const double lse = m + std::log(sum);
    const TokenLogprob& lp = res.logprobs[i];
    EXPECT_EQ(lp.token, res.tokens[i]);
    EXPECT_FLOAT_EQ(lp.logprob, float(adj[res.tokens[i]] - lse));
    ASSERT_EQ(lp.top.size(), 5u);
    for (size_t k = 1; k < lp.top.size(); ++k) EXPECT_GE(lp.top[k - 1].second, lp.top[k].second);
    const auto best = std::max_element(adj.begin(), adj.end()) - adj.begin();
    EXPECT_EQ(lp.top[0].first, best);
    EXPECT_EQ(streamed[i].token, lp.token);
    EXPECT_EQ(streamed[i].logprob, lp.logprob);
    sampler.observe(res.tokens[i]);
    logits = tiny().step(res.tokens[i], s);
  }
  // Off: nothing is recorded.
  GenerationConfig off = c;
  off.logprobs = -1;
  EXPECT_TRUE(engine.submit(Request{.prompt_tokens = p, .config = off}).wait().logprobs.empty());
}

TEST(PrefixCache, LongestPrefixLruByBytesAndScopes) {
  const Model& m = tiny();
  const State s = m.new_state();
  const std::vector<float> logits(256, 1.f);
  const size_t entry = CachedPrefix{"a", {1, 2, 3}, s, logits}.bytes();
  PrefixCache cache(3 * entry + entry / 2);  // room for three
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(cache.lookup("a", t), nullptr);
  cache.insert("a", std::span(t).first(2), s, logits);
  cache.insert("a", std::span(t).first(4), s, logits);
  cache.insert("b", std::span(t).first(5), s, logits);  // another scope
  auto hit = cache.lookup("a", t);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens.size(), 4u);  // longest of scope a, never b's 5
  EXPECT_EQ(cache.lookup("b", std::span(t).first(4)), nullptr);  // b's entry is longer than asked
  EXPECT_EQ(cache.lookup("a", std::vector<int32_t>{1, 9}), nullptr);  // ids decide, not lengths
  // LRU order now: a[4] (just hit), b[5], a[2]. A fourth entry evicts a[2].
  cache.insert("a", std::span(t).first(6), s, logits);
  EXPECT_EQ(cache.stats().entries, 3u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.lookup("a", std::span(t).first(3)), nullptr);
  ASSERT_NE(cache.lookup("b", t), nullptr);
  EXPECT_LE(cache.stats().bytes, cache.max_bytes());
  EXPECT_EQ(cache.lookup("a", t)->tokens.size(), 6u);
  // Too large for the budget: not stored.
  PrefixCache small(entry / 2);
  EXPECT_EQ(small.insert("a", t, s, logits), nullptr);
  EXPECT_EQ(small.stats().entries, 0u);
  EXPECT_THROW(cache.insert("a", {}, s, logits), InputError);
  // Keys: SHA-256 of scope and ids; different scope or ids, different key.
  EXPECT_EQ(prefix_key("a", t).size(), 64u);
  EXPECT_NE(prefix_key("a", t), prefix_key("b", t));
  EXPECT_NE(prefix_key("a", t), prefix_key("a", std::span(t).first(5)));
}

// A shared in-memory second tier, as the replicas' Redis tier will be.
class MemoryTier : public PrefixCacheTier {
 public:
  std::shared_ptr<const CachedPrefix> fetch(std::string_view scope, std::span<const int32_t> tokens,
                                            std::span<const size_t> lengths) override {
    std::lock_guard<std::mutex> l(m_);
    ++fetches;
    for (auto n = lengths.rbegin(); n != lengths.rend(); ++n) {
      auto it = map_.find(prefix_key(scope, tokens.first(*n)));
      if (it != map_.end()) return it->second;
    }
    return nullptr;
  }
  void store(std::shared_ptr<const CachedPrefix> e) override {
    std::lock_guard<std::mutex> l(m_);
    map_[prefix_key(e->scope, e->tokens)] = std::move(e);
  }
  int fetches = 0;

 private:
  std::mutex m_;
  std::map<std::string, std::shared_ptr<const CachedPrefix>> map_;
};

TEST(Engine, SecondTierIsSharedButScopesNeverMix) {
  ByteTokenizer tok;
  auto tier = std::make_shared<MemoryTier>();
  const std::vector<int32_t> p = tok.encode("Shared conversation prefix, long enough.");
  const GenerationConfig c = config_for(2, 8, false);
  EngineOptions o;
  o.second_tier = tier;
  const Model bf16 = tiny().with_precision(Precision::kBf16);
  const Model int8 = Model::load_default(LoadOptions{.quantize = WeightQuantization::kInt8});
  EXPECT_NE(Engine(tiny(), tok, o).cache_scope("zero"), Engine(bf16, tok, o).cache_scope("zero"));
  {
    Engine first(tiny(), tok, o);
    EXPECT_EQ(first.submit(Request{.prompt_tokens = p, .config = c}).wait().cached_tokens, 0);
  }
  const Solo solo = run_solo(tiny(), tok, p, c);
  for (const Model* m : {&bf16, &int8}) {  // other numbers: never served the fp32 entry
    Engine other(*m, tok, o);
    const EngineResult& r = other.submit(Request{.prompt_tokens = p, .config = c}).wait();
    EXPECT_EQ(r.cached_tokens, 0);
    EXPECT_EQ(r.cache_tier, CacheTier::kNone);
  }
  Engine second(tiny(), tok, o);  // a "replica" with an empty local tier
  std::string streamed;
  Request r{.prompt_tokens = p, .config = c};
  r.on_chunk = [&](std::string_view ch, int32_t) {
    streamed += ch;
    return true;
  };
  const EngineResult& got = second.submit(std::move(r)).wait();
  EXPECT_EQ(got.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(got.cache_tier, CacheTier::kSecond);
  expect_same(solo, got, streamed, "second tier");
}

TEST(Engine, TwoEnginesOnTwoModelsConcurrently) {
  ByteTokenizer btok;
  Engine a(tiny(), btok, EngineOptions{.cache_bytes = 0});
  Engine b(world_model(), world_tok(), EngineOptions{.cache_bytes = 0});
  std::mt19937 rng(42);
  struct Job {
    Engine* e;
    const Model* m;
    const Tokenizer* t;
    std::vector<int32_t> prompt;
    GenerationConfig c;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 12; ++i) {
    const bool w = i % 2;
    jobs.push_back({w ? &b : &a, w ? &world_model() : &tiny(), w ? &world_tok() : &btok,
                    random_prompt(rng, w ? 1 : 32, w ? 20000 : 126, 5 + i * 3),
                    config_for(i, 12, i % 3 == 0)});
  }
  std::vector<RequestHandle> hs(jobs.size());
  std::vector<std::string> streamed(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      hs[i] = submit_streamed(*jobs[i].e, jobs[i].prompt, jobs[i].c, &streamed[i], false);
      hs[i].wait();
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i)
    expect_same(run_solo(*jobs[i].m, *jobs[i].t, jobs[i].prompt, jobs[i].c), hs[i].wait(),
                streamed[i], "job " + std::to_string(i));
}

TEST(Engine, SubmitAllIsAllOrNothing) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{.max_rows = 4, .queue_length = 3});
  std::vector<Request> rs(3);
  for (auto& r : rs) r.prompt = "ok";
  rs[2].prompt_tokens = {1, 999};
  rs[2].prompt.clear();
  try {
    engine.submit_all(rs);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("request 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.stats().submitted, 0u);
  rs[2].prompt_tokens = {1, 2};
  std::vector<Request> four = rs;
  four.push_back(rs[0]);
  EXPECT_THROW(engine.submit_all(four), QueueFullError);  // 4 > queue_length 3: none queued
  EXPECT_EQ(engine.stats().submitted, 0u);
  for (const RequestHandle& h : engine.submit_all(rs)) EXPECT_EQ(h.wait().generated_tokens, 128);
  EXPECT_THROW(Engine(tiny(), tok, EngineOptions{.queue_length = 0}), InputError);
}

TEST(Engine, AThrowingCallbackStillLeavesTheStateRule) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  Request r;
  r.prompt = "state rule";
  r.config = config_for(3, 20, true);
  int n = 0;
  r.on_chunk = [&n](std::string_view, int32_t) -> bool {
    if (++n == 4) throw std::runtime_error("disconnected");
    return true;
  };
  const EngineResult got = engine.submit(std::move(r)).wait();
  EXPECT_EQ(got.stop_reason, StopReason::kError);
  ASSERT_EQ(got.tokens.size(), 4u);
  // The token returned before the throw was absorbed, and only it: one token fewer differs.
  EXPECT_TRUE(got.state == state_after(tok.encode("state rule"), got.tokens));
  EXPECT_FALSE(got.state == state_after(tok.encode("state rule"),
                                        {got.tokens.begin(), got.tokens.end() - 1}));
  ASSERT_TRUE(got.exception);
  EXPECT_THROW(std::rethrow_exception(got.exception), std::runtime_error);
}

TEST(Engine, GenerateInsideAPassIsRefusedNotDeadlocked) {
  ByteTokenizer tok;
  const Model& m = tiny();
  bool refused = false;
  ActivationTrace trace = [&](std::string_view name, int, const float*, int64_t, int64_t) {
    if (name != "emb_ln0") return;
    try {
      generate(m, tok, "x", config_for(1, 2, false));
    } catch (const InputError&) {
      refused = true;
    }
  };
  State s = m.new_state();
  m.forward(tok.encode("ab"), s, false, &trace);
  EXPECT_TRUE(refused);
}

TEST(Engine, SecondTierGetsEntriesWithTheLocalTierOff) {
  ByteTokenizer tok;
  auto tier = std::make_shared<MemoryTier>();
  EngineOptions o;
  o.cache_bytes = 0;
  o.second_tier = tier;
  const std::vector<int32_t> p = tok.encode("only the second tier");
  {
    Engine first(tiny(), tok, o);
    EXPECT_EQ(first.submit(Request{.prompt_tokens = p, .config = config_for(1, 4, false)})
                  .wait()
                  .cached_tokens,
              0);
  }
  Engine second(tiny(), tok, o);
  const EngineResult r =
      second.submit(Request{.prompt_tokens = p, .config = config_for(1, 4, false)}).wait();
  EXPECT_EQ(r.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(r.cache_tier, CacheTier::kSecond);
}

TEST(Engine, ShutdownReturnsAfterCompletionCallbacks) {
  ByteTokenizer tok;
  std::atomic<int> done{0};
  Engine engine(tiny(), tok, EngineOptions{.max_rows = 1});
  for (int i = 0; i < 3; ++i) {
    Request r{.prompt = "bye", .config = config_for(1, 5, false)};
    r.on_done = [&done](const EngineResult&) {
      std::this_thread::sleep_for(5ms);
      done.fetch_add(1);
    };
    engine.submit(std::move(r));
  }
  engine.shutdown(10s);
  EXPECT_EQ(done.load(), 3);
}

TEST(Engine, ShutdownFinishesRunningRequestsAndRefusesNewOnes) {
  ByteTokenizer tok;
  Engine engine(tiny(), tok, EngineOptions{});
  RequestHandle h = engine.submit(Request{.prompt = "bye", .config = config_for(1, 20, false)});
  engine.shutdown(10s);
  EXPECT_TRUE(h.done());
  EXPECT_EQ(h.wait().generated_tokens, 20);
  EXPECT_THROW(engine.submit(Request{.prompt = "x"}), EngineStoppedError);
}

// 500 requests with random arrivals, lengths, configs and cancels: every result that was not
// cancelled equals its solo run; cancelled ones are prefixes of it.
TEST(Engine, SoakRandomArrivalsAndCancels) {
  ByteTokenizer tok;
  std::mt19937 rng(2026);
  EngineOptions o;
  o.max_rows = 12;
  o.prefill_chunk = 7;
  o.prefill_chunk_idle = 33;
  o.queue_length = 1000;
  o.cache_bytes = size_t{32} << 20;
  Engine engine(tiny(), tok, o);
#if defined(__SANITIZE_THREAD__)
  constexpr int kRequests = 120;  // ThreadSanitizer runs ~40x slower; the ASan/plain runs do 500
#else
  constexpr int kRequests = 500;
#endif
  // A few shared prefixes so the cache is exercised too.
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 5; ++i) stems.push_back(random_prompt(rng, 32, 126, 10 + 7 * i));
  struct Item {
    std::vector<int32_t> prompt;
    GenerationConfig c;
    RequestHandle h;
    bool cancel = false;
    std::string streamed;
  };
  std::vector<Item> items(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    Item& it = items[i];
    it.prompt = stems[rng() % stems.size()];
    const auto tail = random_prompt(rng, 32, 126, static_cast<int>(rng() % 12));
    if (rng() % 2) it.prompt.insert(it.prompt.end(), tail.begin(), tail.end());
    it.c = config_for(i, static_cast<int>(rng() % 12), rng() % 2);
    it.cancel = rng() % 7 == 0;
    it.h = submit_streamed(engine, it.prompt, it.c, &it.streamed);
    if (it.cancel) it.h.cancel();
    if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
  }
  int cancelled = 0;
  for (Item& it : items) {
    const EngineResult& r = it.h.wait();
    const Solo solo = run_solo(tiny(), tok, it.prompt, it.c);
    if (r.stop_reason == StopReason::kCancelled) {
      ++cancelled;
      EXPECT_TRUE(it.cancel);
      EXPECT_LE(r.tokens.size(), solo.result.tokens.size());
      EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), solo.result.tokens.begin()));
      continue;
    }
    expect_same(solo, r, it.streamed, "soak");
  }
  const EngineStats st = engine.stats();
  EXPECT_EQ(st.completed, static_cast<uint64_t>(kRequests));
  EXPECT_GT(st.cache.hits, 0u);
  EXPECT_GT(cancelled, 0);
}

}  // namespace
}  // namespace wick::test
