// Time to first token of a follow-up turn whose history is (a) in the local prefix cache, (b) in
// Redis only (another replica wrote it), (c) nowhere (recomputed); and the Redis round trip of
// one state (README "Scaling out").
//   bench_replica_ttft MODEL REDIS_URL [HISTORY_TOKENS=2000] [REPS=5]
// MODEL: a checkpoint (make one of real geometry with `wick synth`); REDIS_URL: a running Redis
// (e.g. redis://127.0.0.1:6379; the bench writes keys under "wickbench:"). Prints medians.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "bench/timer.h"
#include "replicas/redis_tier.h"
#include "wick/engine.h"
#include "wick/prefix_codec.h"
#include "wick/tokenizer.h"

using namespace wick;
using wick::bench::Clock;
using wick::bench::median;
using wick::bench::ms_since;

namespace {

std::vector<int32_t> random_ids(std::mt19937& rng, int vocab, size_t n) {
  std::uniform_int_distribution<int32_t> id(1, vocab - 1);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = id(rng);
  return v;
}

// TTFT of the follow-up (history + 16 new tokens) on `e`.
double follow_up(Engine& e, const std::vector<int32_t>& history, const std::vector<int32_t>& turn,
                 int* cached, CacheTier* tier) {
  Request q;
  q.prompt_tokens = history;
  q.prompt_tokens.insert(q.prompt_tokens.end(), turn.begin(), turn.end());
  q.cache_boundaries = {history.size()};
  q.config.max_tokens = 1;
  const EngineResult r = e.submit(std::move(q)).wait();
  *cached = r.cached_tokens;
  *tier = r.cache_tier;
  if (std::getenv("WICK_BENCH_VERBOSE"))
    std::fprintf(stderr, "cached %d tier %d queue %.1f ms prefill %.1f ms ttft %.1f ms\n",
                 r.cached_tokens, static_cast<int>(r.cache_tier), r.queue_ms, r.timings.prefill_ms,
                 r.ttft_ms);
  return r.ttft_ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL REDIS_URL [HISTORY_TOKENS=2000] [REPS=5]\n", argv[0]);
    return 2;
  }
  const Model model = Model::load(argv[1]);
  const size_t n_hist = argc > 3 ? std::stoul(argv[3]) : 2000;
  const int reps = argc > 4 ? std::stoi(argv[4]) : 5;
  const ByteTokenizer tok;  // ids are given directly; the tokenizer only decodes
  replicas::RedisTierOptions ro;
  ro.address = replicas::parse_redis_url(argv[2]);
  ro.prefix = "wickbench";
  ro.read_timeout = std::chrono::milliseconds(5000);
  const int V = model.geometry().vocab;
  std::mt19937 rng(std::random_device{}());  // fresh ids each run: nothing left in Redis matches
  std::vector<double> local, redis, none, rtt;
  size_t value_bytes = 0;
  for (int r = 0; r < reps; ++r) {
    // Each case gets its own 16-token turn, so none finds another's prompt end in a cache.
    const std::vector<int32_t> history = random_ids(rng, V, n_hist), turn_a = random_ids(rng, V, 16),
                               turn_b = random_ids(rng, V, 16), turn_c = random_ids(rng, V, 16);
    int cached = 0;
    CacheTier tier{};
    // Replica A prefills the history (its states go to Redis); replica B, with an empty local
    // tier, then takes the follow-up from Redis (b) before A continues it locally (a) - so Redis
    // holds only the history when (b) runs.
    auto tier_a = std::make_shared<replicas::RedisTier>(model, ro);
    EngineOptions oa;
    oa.second_tier = tier_a;
    Engine a(model, tok, oa);
    {
      Request q;
      q.prompt_tokens = history;
      q.config.max_tokens = 1;
      a.submit(std::move(q)).wait();
      tier_a->flush(std::chrono::seconds(30));
    }
    {  // (b) replica B, empty local tier
      auto tier_b = std::make_shared<replicas::RedisTier>(model, ro);
      EngineOptions o;
      o.second_tier = tier_b;
      Engine b(model, tok, o);
      redis.push_back(follow_up(b, history, turn_b, &cached, &tier));
      if (tier != CacheTier::kSecond) std::fprintf(stderr, "warning: (b) was not a Redis hit\n");
      // The round trip of one state alone: a lookup of the history.
      const std::vector<size_t> lengths = {history.size()};
      const auto t0 = Clock::now();
      auto e = tier_b->fetch(b.cache_scope("zero"), history, lengths);
      rtt.push_back(ms_since(t0));
      if (e) value_bytes = encode_cached_prefix(*e, model).size();
    }
    local.push_back(follow_up(a, history, turn_a, &cached, &tier));
    if (tier != CacheTier::kLocal) std::fprintf(stderr, "warning: (a) was not a local hit\n");
    {  // (c) recomputed
      EngineOptions o;
      o.cache_bytes = 0;
      Engine c(model, tok, o);
      none.push_back(follow_up(c, history, turn_c, &cached, &tier));
    }
  }
  std::printf("history %zu tokens, %d reps, state value %.2f MiB\n", n_hist, reps,
              value_bytes / 1048576.0);
  std::printf("TTFT local %.1f ms | redis %.1f ms | recomputed %.1f ms | redis round trip %.1f ms\n",
              median(local), median(redis), median(none), median(rtt));
  return 0;
}
