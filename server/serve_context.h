// What the HTTP handlers of `wick serve` share: the served model's engine and tasks, the chat
// template, limits and metrics. Built once at start-up by the CLI; immutable afterwards except for
// the thread-safe members (Engine, Metrics, the atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/chat_template.h"
#include "server/metrics.h"
#include "wick/embed.h"
#include "wick/engine.h"
#include "wick/lora.h"
#include "wick/rerank.h"
#include "wick/tokenizer.h"

namespace wick::server {

struct ServeLimits {
  int64_t max_prompt_tokens = 65536;  // longer prompts are a 400 naming --max-prompt-tokens
  int64_t max_tokens_limit = 65536;   // larger max_tokens is a 400 naming --max-tokens-limit
  int max_n = 64;                     // choices per request
};

// A LoRA adapter registered at start-up (`wick serve --adapter NAME=FILE[:ALPHA]`), chosen per
// request by the `lora` field (docs/serving.md §6.2).
struct ServedAdapter {
  std::string id;                              // NAME
  std::string source;                          // the file's name (no directories)
  std::shared_ptr<const LoraAdapter> adapter;  // loaded against the served model, lora_scale 1
};

struct ServeContext {
  std::string served_id;  // the model id of every response
  int64_t created = 0;    // start-up time (Unix seconds), /v1/models' `created`
  std::string fingerprint;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int32_t> stop_tokens;  // default_stop_tokens(vocab): World models stop at id 0
  Engine* engine = nullptr;   // null: the model has no LM head (embeddings only)
  std::optional<Embedder> embedder;
  std::optional<Reranker> reranker;
  ChatTemplate chat_template;
  ServeLimits limits;
  std::string api_key;        // empty: no authentication
  std::string cors_origin;    // empty: no CORS headers
  std::map<std::string, std::string> state_sources;  // registered state id -> where it came from
  std::vector<ServedAdapter> adapters;               // in registration order (llama.cpp's ids)
  Metrics metrics;
  std::atomic<bool> draining{false};
};

// The CORS headers of every answer: none without --cors-origin.
inline std::vector<std::pair<std::string, std::string>> cors_headers(const ServeContext& ctx) {
  if (ctx.cors_origin.empty()) return {};
  return {{"Access-Control-Allow-Origin", ctx.cors_origin}, {"Vary", "Origin"}};
}

}  // namespace wick::server
