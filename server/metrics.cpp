#include "server/metrics.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace wick::server {

namespace pm = prometheus;

namespace {

// A Prometheus counter that mirrors a running total kept elsewhere (the engine's, the Redis
// tier's): adds what the total grew by since `last` (in `unit`s), never goes back.
template <typename T>
void advance(pm::Counter& c, T now, T& last, double unit = 1.0) {
  if (now > last) c.Increment(static_cast<double>(now - last) * unit);
  last = std::max(last, now);
}

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<pm::Registry> registry = std::make_shared<pm::Registry>();
  pm::Family<pm::Counter>& requests = pm::BuildCounter()
                                          .Name("wick_requests_total")
                                          .Help("HTTP requests answered, by route and status")
                                          .Register(*registry);
  pm::Counter& prompt = pm::BuildCounter()
                            .Name("wick_prompt_tokens_total")
                            .Help("Prompt tokens of finished requests (cached ones included)")
                            .Register(*registry)
                            .Add({});
  pm::Counter& cached = pm::BuildCounter()
                            .Name("wick_prompt_tokens_cached_total")
                            .Help("Prompt tokens served from the prefix state cache")
                            .Register(*registry)
                            .Add({});
  pm::Counter& generated = pm::BuildCounter()
                               .Name("wick_generated_tokens_total")
                               .Help("Tokens generated")
                               .Register(*registry)
                               .Add({});
  pm::Counter& spec_drafted = pm::BuildCounter()
                                  .Name("wick_spec_drafted_total")
                                  .Help("Speculative decoding: draft tokens verified")
                                  .Register(*registry)
                                  .Add({});
  pm::Counter& spec_accepted = pm::BuildCounter()
                                   .Name("wick_spec_accepted_total")
                                   .Help("Speculative decoding: draft tokens accepted (picked by "
                                         "the sampler)")
                                   .Register(*registry)
                                   .Add({});
  pm::Gauge& running = pm::BuildGauge()
                           .Name("wick_requests_running")
                           .Help("Engine rows running (prefill or decode)")
                           .Register(*registry)
                           .Add({});
  pm::Gauge& queued = pm::BuildGauge()
                          .Name("wick_requests_queued")
                          .Help("Requests waiting for an engine row")
                          .Register(*registry)
                          .Add({});
  pm::Gauge& cache_bytes = pm::BuildGauge()
                               .Name("wick_prefix_cache_bytes")
                               .Help("Bytes held by the local prefix state cache")
                               .Register(*registry)
                               .Add({});
  pm::Gauge& cache_entries = pm::BuildGauge()
                                 .Name("wick_prefix_cache_entries")
                                 .Help("Entries of the local prefix state cache")
                                 .Register(*registry)
                                 .Add({});
  pm::Gauge& draining = pm::BuildGauge()
                            .Name("wick_draining")
                            .Help("1 while the server shuts down")
                            .Register(*registry)
                            .Add({});
  pm::Histogram& ttft =
      pm::BuildHistogram()
          .Name("wick_time_to_first_token_seconds")
          .Help("Request arrival to its first generated token")
          .Register(*registry)
          .Add({}, pm::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                   2.5, 5, 10, 30, 60});
  pm::Histogram& itl =
      pm::BuildHistogram()
          .Name("wick_inter_token_latency_seconds")
          .Help("Time between consecutive generated tokens of a request")
          .Register(*registry)
          .Add({}, pm::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                   0.25, 0.5, 1, 2.5});
  pm::Histogram& duration =
      pm::BuildHistogram()
          .Name("wick_request_duration_seconds")
          .Help("Generation request arrival to completion")
          .Register(*registry)
          .Add({}, pm::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
                                                   60, 300});
  pm::Counter& pass_seconds = pm::BuildCounter()
                                  .Name("wick_engine_pass_seconds_total")
                                  .Help("Time the engine spent inside batched model passes")
                                  .Register(*registry)
                                  .Add({});
  pm::Counter& busy_seconds = pm::BuildCounter()
                                  .Name("wick_engine_busy_seconds_total")
                                  .Help("Time the engine spent in iterations (passes, sampling, "
                                        "streaming, cache)")
                                  .Register(*registry)
                                  .Add({});
  pm::Counter& iterations = pm::BuildCounter()
                                .Name("wick_engine_iterations_total")
                                .Help("Batched passes the engine ran")
                                .Register(*registry)
                                .Add({});
  // The replicas' shared tier (--redis); its families exist only when one is configured, so a
  // server without it does not export zeros that look like a dead Redis.
  struct SecondTier {
    pm::Counter &hits, &misses, &errors, &dropped, &written;
    pm::Gauge &queue, &connected;
    PrefixCacheTierStats last;
  };
  std::unique_ptr<SecondTier> l2;
  std::mutex scrape_mutex;  // the engine totals last copied into the counters above
  double last_pass_ms = 0, last_busy_ms = 0;
  uint64_t last_iterations = 0;
  std::mutex mutex;  // the requests family's label map
  std::map<std::pair<std::string, int>, pm::Counter*> by_route;
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::request(std::string_view endpoint, int status) {
  pm::Counter* c;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto key = std::make_pair(std::string(endpoint), status);
    auto it = impl_->by_route.find(key);
    if (it == impl_->by_route.end()) {
      pm::Counter& added =
          impl_->requests.Add({{"endpoint", key.first}, {"status", std::to_string(status)}});
      it = impl_->by_route.emplace(key, &added).first;
    }
    c = it->second;
  }
  c->Increment();
}

void Metrics::generation(const EngineResult& r) {
  impl_->prompt.Increment(r.prompt_tokens);
  impl_->cached.Increment(r.cached_tokens);
  impl_->generated.Increment(r.generated_tokens);
  impl_->spec_drafted.Increment(r.speculative.drafted);
  impl_->spec_accepted.Increment(r.speculative.accepted);
  if (!r.token_times_ms.empty()) impl_->ttft.Observe(r.token_times_ms.front() / 1000.0);
  for (size_t i = 1; i < r.token_times_ms.size(); ++i)
    impl_->itl.Observe((r.token_times_ms[i] - r.token_times_ms[i - 1]) / 1000.0);
  impl_->duration.Observe(r.total_ms / 1000.0);
}

void Metrics::prompt_tokens(uint64_t n) { impl_->prompt.Increment(static_cast<double>(n)); }

std::string Metrics::scrape(const Engine* engine, bool draining) {
  if (engine) {
    const EngineStats s = engine->stats();
    impl_->running.Set(s.running);
    impl_->queued.Set(s.queued);
    impl_->cache_bytes.Set(static_cast<double>(s.cache.bytes));
    impl_->cache_entries.Set(static_cast<double>(s.cache.entries));
    std::lock_guard<std::mutex> lock(impl_->scrape_mutex);
    advance(impl_->pass_seconds, s.pass_ms, impl_->last_pass_ms, 1e-3);
    advance(impl_->busy_seconds, s.busy_ms, impl_->last_busy_ms, 1e-3);
    advance(impl_->iterations, s.iterations, impl_->last_iterations);
    if (s.has_second_tier) {
      auto& r = *impl_->registry;
      auto counter = [&r](const char* name, const char* help) -> pm::Counter& {
        return pm::BuildCounter().Name(name).Help(help).Register(r).Add({});
      };
      auto gauge = [&r](const char* name, const char* help) -> pm::Gauge& {
        return pm::BuildGauge().Name(name).Help(help).Register(r).Add({});
      };
      if (!impl_->l2)
        impl_->l2.reset(new Impl::SecondTier{
            counter("wick_cache_l2_hits_total", "Prompts continued from a state in Redis"),
            counter("wick_cache_l2_misses_total", "Redis lookups that found no usable state"),
            counter("wick_cache_l2_errors_total",
                    "Redis failures: refused (corrupt or foreign) values, timeouts, unreachable "
                    "server; each request recomputed instead"),
            counter("wick_cache_l2_dropped_total",
                    "States not written to Redis (write queue full, or Redis unreachable)"),
            counter("wick_cache_l2_written_total", "States written to Redis"),
            gauge("wick_cache_l2_write_queue", "States waiting for the Redis writer thread"),
            gauge("wick_cache_l2_connected", "1 when the last Redis lookup reached the server"),
            {}});
      Impl::SecondTier& l2 = *impl_->l2;
      const PrefixCacheTierStats& t = s.second_tier;
      advance(l2.hits, t.hits, l2.last.hits);
      advance(l2.misses, t.misses, l2.last.misses);
      advance(l2.errors, t.errors, l2.last.errors);
      advance(l2.dropped, t.dropped, l2.last.dropped);
      advance(l2.written, t.written, l2.last.written);
      l2.queue.Set(static_cast<double>(t.write_queue));
      l2.connected.Set(t.connected ? 1 : 0);
    }
  }
  impl_->draining.Set(draining ? 1 : 0);
  return pm::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace wick::server
