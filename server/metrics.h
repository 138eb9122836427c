// Prometheus metrics of `wick serve` (GET /metrics, text format 0.0.4), through prometheus-cpp's
// registry. Counters and histograms are updated as requests end; gauges (running rows, queued
// requests, prefix-cache size) are read from the engine at each scrape. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "wick/engine.h"

namespace wick::server {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  // One answered request: `endpoint` is the route's name (a fixed set: chat_completions,
  // completions, embeddings, rerank, models, states, tokenize, detokenize, health, metrics, page,
  // other), `status` the HTTP status.
  void request(std::string_view endpoint, int status);
  // One finished generation row (a choice): token counts, speculative drafts / acceptances,
  // TTFT, inter-token gaps, duration.
  void generation(const EngineResult& r);
  // Tokens embedded or scored outside the engine (embeddings, rerank).
  void prompt_tokens(uint64_t n);
  // The exposition text; `engine` (may be null) fills the gauges.
  std::string scrape(const Engine* engine, bool draining);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wick::server
