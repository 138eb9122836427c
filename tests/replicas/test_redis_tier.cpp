// The replicas' Redis tier of the prefix cache (replicas/redis_tier.h, README "Scaling out"):
// values round-trip exactly and every damaged or foreign one is refused; two engines ("replicas")
// share conversation states through a real redis-server; a dead Redis is a miss and the tier
// recovers when it is back; replicas with other settings never use each other's entries.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "replicas/redis_connection.h"
#include "replicas/redis_server.h"
#include "replicas/redis_tier.h"
#include "replicas/redis_url.h"
#include "test_util.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/prefix_codec.h"

namespace wick::test {
namespace {

using namespace std::chrono_literals;
using replicas::RedisConnection;
using replicas::RedisTier;
using replicas::RedisTierOptions;
using replicas::RedisValue;

const Model& tiny() {
  static const Model m = Model::load_default();
  return m;
}

TEST(RedisUrl, ParsesEveryPartAndRefusesWhatIsWrong) {
  auto a = replicas::parse_redis_url("redis://:s3cret@10.0.0.5:6380/2");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.password, "s3cret");
  EXPECT_EQ(a.db, 2);
  EXPECT_TRUE(a.user.empty());
  a = replicas::parse_redis_url("redis://alice:pw@h:1");  // a Redis 6+ ACL user
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "pw");
  a = replicas::parse_redis_url("redis://cache.local");
  EXPECT_EQ(a.host, "cache.local");
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.db, 0);
  EXPECT_TRUE(a.password.empty());
  a = replicas::parse_redis_url("redis://[::1]:7000");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 7000);
  for (const char* bad : {"http://x:1", "rediss://x:1", "redis://:1", "redis://h:0",
                          "redis://h:70000", "redis://h:12ab", "redis://h:1/x", "redis://[::1",
                          "redis://nocolon@h:1"}) {
    EXPECT_THROW(replicas::parse_redis_url(bad), InputError) << bad;
  }
  // The password never appears in a message.
  try {
    replicas::parse_redis_url("redis://:hunter2@h:99999");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

// An entry of the tiny model: the state after `text` and the logits of its last position.
CachedPrefix entry_for(const Model& m, const std::string& scope, const std::string& text) {
  ByteTokenizer tok;
  CachedPrefix e;
  e.scope = scope;
  e.tokens = tok.encode(text);
  e.state = m.new_state();
  e.logits = m.forward(e.tokens, e.state);
  return e;
}

TEST(PrefixCodec, RoundTripsExactlyAndRefusesEveryDamagedOrForeignValue) {
  const CachedPrefix e = entry_for(tiny(), "scope-a", "A conversation so far.");
  const std::string v = encode_cached_prefix(e, tiny());
  const CachedPrefix back = decode_cached_prefix(v, tiny(), "scope-a", e.tokens);
  EXPECT_EQ(back.tokens, e.tokens);
  EXPECT_EQ(back.logits, e.logits);
  EXPECT_TRUE(back.state == e.state);
  const CachedPrefix other = entry_for(tiny(), "scope-a", "Another conversation.");
  EXPECT_FALSE(other.state == e.state);  // the comparison above can fail

  // Truncated anywhere, or one byte too many.
  for (size_t cut : {size_t{0}, size_t{5}, size_t{12}, size_t{40}, v.size() / 2, v.size() - 1})
    EXPECT_THROW(decode_cached_prefix(v.substr(0, cut), tiny(), "scope-a", e.tokens), Error) << cut;
  EXPECT_THROW(decode_cached_prefix(v + "x", tiny(), "scope-a", e.tokens), Error);
  // Garbage, a wrong magic, a lying length.
  EXPECT_THROW(decode_cached_prefix(std::string(v.size(), '\x55'), tiny(), "scope-a", e.tokens), Error);
  std::string bad = v;
  bad[0] = 'X';
  EXPECT_THROW(decode_cached_prefix(bad, tiny(), "scope-a", e.tokens), FormatError);
  bad = v;
  bad[11] = '\x7f';  // the scope length's high byte: longer than any scope
  EXPECT_THROW(decode_cached_prefix(bad, tiny(), "scope-a", e.tokens), FormatError);
  // Another scope (other settings), other ids (a wrong key), another model.
  EXPECT_THROW(decode_cached_prefix(v, tiny(), "scope-b", e.tokens), StateFileError);
  EXPECT_THROW(decode_cached_prefix(v, tiny(), "scope-a", other.tokens), Error);
  const Model synth = synthetic_model("2:64:256", DType::F32, 3);
  const std::string foreign = encode_cached_prefix(entry_for(synth, "scope-a", "A conversation so far."), synth);
  EXPECT_THROW(decode_cached_prefix(foreign, tiny(), "scope-a", e.tokens), StateFileError);
  // Non-finite numbers: the logits and the state travel in one state file, which refuses both.
  CachedPrefix nan = e;
  nan.logits[3] = std::nanf("");
  EXPECT_THROW(decode_cached_prefix(encode_cached_prefix(nan, tiny()), tiny(), "scope-a", e.tokens),
               StateFileError);
  nan = e;
  nan.state.wkv(1)[7] = INFINITY;
  EXPECT_THROW(decode_cached_prefix(encode_cached_prefix(nan, tiny()), tiny(), "scope-a", e.tokens),
               StateFileError);
}

#define NEED_REDIS() \
  if (!have_redis_server()) GTEST_SKIP() << "redis-server is not installed (Debian: redis-server)"

std::shared_ptr<RedisTier> tier_on(const RedisServer& r, const Model& m = tiny()) {
  RedisTierOptions o;
  o.address = replicas::parse_redis_url(r.url());
  o.prefix = "wicktest";
  return std::make_shared<RedisTier>(m, o);
}

// Engine options of a replica: `tier` (may be null) behind a local tier, or behind none.
EngineOptions replica(std::shared_ptr<PrefixCacheTier> tier, bool local_tier = true) {
  EngineOptions o;
  o.second_tier = std::move(tier);
  if (!local_tier) o.cache_bytes = 0;
  return o;
}

struct Outcome {
  EngineResult result;
  std::string streamed;
};

Outcome run(Engine& e, const std::vector<int32_t>& prompt, const GenerationConfig& c,
        std::vector<size_t> boundaries = {}) {
  Outcome out;
  Request q;
  q.prompt_tokens = prompt;
  q.config = c;
  q.cache_boundaries = std::move(boundaries);
  q.on_chunk = [&out](std::string_view ch, int32_t) {
    out.streamed += ch;
    return true;
  };
  out.result = e.submit(std::move(q)).wait();
  return out;
}

GenerationConfig seeded(uint64_t seed) {
  GenerationConfig c;
  c.max_tokens = 12;
  c.sampling.temperature = 1.0f;
  c.sampling.top_p = 0.9f;
  c.sampling.seed = seed;
  return c;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.result.tokens, b.result.tokens) << what;
  EXPECT_EQ(a.result.text, b.result.text) << what;
  EXPECT_EQ(a.streamed, b.streamed) << what;
  EXPECT_TRUE(a.result.state == b.result.state) << what;
}

// All keys of the test prefix.
std::vector<std::string> keys_in(RedisConnection& c) {
  std::vector<std::string> out;
  for (const RedisValue& v : c.command({"KEYS", "wicktest:*"}).elements) out.push_back(v.str);
  return out;
}

TEST(RedisTier, TwoReplicasShareConversationStatesExactly) {
  NEED_REDIS();
  RedisServer redis;
  ByteTokenizer tok;
  const std::vector<int32_t> system = tok.encode("System: you are terse.\n\n");
  std::vector<int32_t> p = system;
  for (int32_t t : tok.encode("User: hello there\n\nAssistant:")) p.push_back(t);
  const GenerationConfig c = seeded(5);
  Engine solo_engine(tiny(), tok, replica(nullptr, false));
  const Outcome solo = run(solo_engine, p, c);

  auto tier_a = tier_on(redis);
  auto tier_b = tier_on(redis);
  // Replica B has no local tier: everything it reuses comes from Redis.
  Engine a(tiny(), tok, replica(tier_a)), b(tiny(), tok, replica(tier_b, false));
  const Outcome first = run(a, p, c, {system.size()});
  expect_same(first, solo, "replica A, uncached");
  EXPECT_EQ(first.result.cache_tier, CacheTier::kNone);
  ASSERT_TRUE(tier_a->flush(5s));
  RedisConnection raw(replicas::parse_redis_url(redis.url()), 2s);
  // Stored: the system-prompt boundary, the prompt end and the generation end.
  EXPECT_EQ(keys_in(raw).size(), 3u);
  EXPECT_EQ(raw.command({"EXISTS", tier_a->key(a.cache_scope("zero"), p)}).integer, 1);

  const Outcome second = run(b, p, c, {system.size()});
  expect_same(second, solo, "replica B from Redis");
  EXPECT_EQ(second.result.cache_tier, CacheTier::kSecond);
  EXPECT_EQ(second.result.cached_tokens, static_cast<int>(p.size()));
  EXPECT_EQ(tier_b->stats().hits, 1u);
  EXPECT_EQ(tier_b->stats().errors, 0u);

  // Another user message after the same system prompt: B starts from the system boundary.
  std::vector<int32_t> q = system;
  for (int32_t t : tok.encode("User: something else\n\nAssistant:")) q.push_back(t);
  const Outcome third = run(b, q, c, {system.size()});
  EXPECT_EQ(third.result.cache_tier, CacheTier::kSecond);
  EXPECT_EQ(third.result.cached_tokens, static_cast<int>(system.size()));
  expect_same(third, run(solo_engine, q, c), "system prompt from Redis");
  EXPECT_NE(third.result.tokens, second.result.tokens);
}

TEST(RedisTier, DamagedAndForeignValuesAreRefusedAndRecomputed) {
  NEED_REDIS();
  RedisServer redis;
  ByteTokenizer tok;
  const std::vector<int32_t> p = tok.encode("User: a question worth caching\n\nAssistant:");
  const GenerationConfig c = seeded(9);
  Engine solo_engine(tiny(), tok, replica(nullptr, false));
  const Outcome solo = run(solo_engine, p, c);
  auto writer = tier_on(redis);
  {
    Engine a(tiny(), tok, replica(writer));
    run(a, p, c);
    ASSERT_TRUE(writer->flush(5s));
  }
  RedisConnection raw(replicas::parse_redis_url(redis.url()), 2s);
  const std::vector<std::string> keys = keys_in(raw);
  ASSERT_FALSE(keys.empty());
  std::map<std::string, std::string> good;
  for (const auto& k : keys) good[k] = raw.command({"GET", k}).str;
  const Model synth = synthetic_model("2:64:256", DType::F32, 3);
  const std::string foreign = encode_cached_prefix(entry_for(synth, "x", "whatever"), synth);
  int round = 0;
  for (const std::string& kind : {"garbage", "truncated", "foreign"}) {
    for (const auto& [k, v] : good) {
      std::string bad = kind == "garbage"     ? std::string(777, 'g')
                        : kind == "truncated" ? v.substr(0, v.size() / 3)
                                              : foreign;
      raw.command({"SET", k, bad});
    }
    auto reader = tier_on(redis);
    Engine b(tiny(), tok, replica(reader, false));
    const Outcome got = run(b, p, c);
    expect_same(got, solo, kind);
    EXPECT_EQ(got.result.cached_tokens, 0) << kind;
    EXPECT_EQ(got.result.cache_tier, CacheTier::kNone) << kind;
    EXPECT_GE(reader->stats().errors, 1u) << kind;
    EXPECT_EQ(reader->stats().hits, 0u) << kind;
    ++round;
  }
  EXPECT_EQ(round, 3);
}

TEST(RedisTier, OtherSettingsNeverShareEntries) {
  NEED_REDIS();
  RedisServer redis;
  ByteTokenizer tok;
  const std::vector<int32_t> p = tok.encode("User: shared prefix?\n\nAssistant:");
  const GenerationConfig c = seeded(1);
  auto writer = tier_on(redis);
  {
    Engine a(tiny(), tok, replica(writer));
    run(a, p, c);
    ASSERT_TRUE(writer->flush(5s));
  }
  const Model bf16 = tiny().with_precision(Precision::kBf16);
  auto reader = tier_on(redis, bf16);
  Engine b(bf16, tok, replica(reader, false));
  const Outcome got = run(b, p, c);
  EXPECT_EQ(got.result.cache_tier, CacheTier::kNone);
  EXPECT_EQ(got.result.cached_tokens, 0);
  EXPECT_EQ(reader->stats().misses, 1u);
  // An fp32 replica does get it (the miss above was the scope, not the store).
  auto fp32 = tier_on(redis);
  Engine d(tiny(), tok, replica(fp32, false));
  EXPECT_EQ(run(d, p, c).result.cache_tier, CacheTier::kSecond);
}

TEST(RedisTier, ADeadRedisIsAMissAndTheTierRecoversWithoutARestart) {
  NEED_REDIS();
  auto redis = std::make_unique<RedisServer>();
  const int port = redis->port();
  ByteTokenizer tok;
  const GenerationConfig c = seeded(3);
  Engine solo_engine(tiny(), tok, replica(nullptr, false));
  auto tier = tier_on(*redis);
  Engine e(tiny(), tok, replica(tier, false));
  const std::vector<int32_t> p1 = tok.encode("User: first\n\nAssistant:");
  run(e, p1, c);
  ASSERT_TRUE(tier->flush(5s));
  redis->kill_now();
  // Requests go on, recomputed; the failures are counted.
  const std::vector<int32_t> p2 = tok.encode("User: second\n\nAssistant:");
  for (int i = 0; i < 3; ++i) {
    const Outcome got = run(e, p1, c);
    expect_same(got, run(solo_engine, p1, c), "Redis down");
    EXPECT_EQ(got.result.cache_tier, CacheTier::kNone);
  }
  run(e, p2, c);
  EXPECT_GE(tier->stats().errors, 1u);
  EXPECT_FALSE(tier->stats().connected);
  // Back on the same port (empty): the tier reconnects after its backoff and serves again.
  redis = std::make_unique<RedisServer>(port);
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    run(e, p2, c);  // stores p2 once the writer is connected again
    tier->flush(2s);
    served = run(e, p2, c).result.cache_tier == CacheTier::kSecond;
    if (!served) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(served) << "the tier did not recover within 20 s";
  EXPECT_TRUE(tier->stats().connected);
}

TEST(RedisTier, AFullWriteQueueDropsAndCountsInsteadOfWaiting) {
  NEED_REDIS();
  RedisServer redis;
  RedisTierOptions o;
  o.address = replicas::parse_redis_url(redis.url());
  o.prefix = "wicktest";
  o.queue_entries = 1;
  auto tier = std::make_shared<RedisTier>(tiny(), o);
  const CachedPrefix e = entry_for(tiny(), "s", "x");
  for (int i = 0; i < 200; ++i) tier->store(std::make_shared<CachedPrefix>(e));
  EXPECT_GE(tier->stats().dropped, 1u);
  EXPECT_LE(tier->stats().write_queue, 2u);
  EXPECT_TRUE(tier->flush(5s));
  EXPECT_GE(tier->stats().written, 1u);
}

}  // namespace
}  // namespace wick::test

namespace wick::test {
namespace {

// A Redis where scripts are renamed away (or denied by an ACL): lookups fall back to MGET, with
// the same longest-valid-first rule.
TEST(RedisTier, WithoutScriptsLookupsUseMget) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server is not installed (Debian: redis-server)";
  RedisServer redis(0, "--rename-command EVAL ''");
  ByteTokenizer tok;
  std::vector<int32_t> system = tok.encode("System: no scripts here.\n\n");
  std::vector<int32_t> p = system;
  for (int32_t t : tok.encode("User: hi\n\nAssistant:")) p.push_back(t);
  GenerationConfig c;
  c.max_tokens = 6;
  RedisTierOptions o;
  o.address = replicas::parse_redis_url(redis.url());
  o.prefix = "wicktest";
  auto writer = std::make_shared<RedisTier>(tiny(), o);
  {
    Engine a(tiny(), tok, replica(writer));
    Request q;
    q.prompt_tokens = p;
    q.config = c;
    q.cache_boundaries = {system.size()};
    a.submit(std::move(q)).wait();
    ASSERT_TRUE(writer->flush(5s));
  }
  // Damage the longest (the prompt end): the boundary entry is used instead, in the same reply.
  RedisConnection raw(o.address, 2s);
  raw.command({"SET", writer->key(Engine(tiny(), tok).cache_scope("zero"), p), "damaged"});
  auto reader = std::make_shared<RedisTier>(tiny(), o);
  Engine b(tiny(), tok, replica(reader, false));
  Request q;
  q.prompt_tokens = p;
  q.config = c;
  q.cache_boundaries = {system.size()};
  const EngineResult r = b.submit(std::move(q)).wait();
  EXPECT_EQ(r.cache_tier, CacheTier::kSecond);
  EXPECT_EQ(r.cached_tokens, static_cast<int>(system.size()));
  EXPECT_EQ(reader->stats().hits, 1u);
  EXPECT_EQ(reader->stats().errors, 1u);  // the damaged value
  Engine solo(tiny(), tok, replica(nullptr, false));
  Request s;
  s.prompt_tokens = p;
  s.config = c;
  const EngineResult want = solo.submit(std::move(s)).wait();
  EXPECT_EQ(r.tokens, want.tokens);
  EXPECT_TRUE(r.state == want.state);
}

}  // namespace
}  // namespace wick::test
