// The router of `wick serve` without a socket: the input is raw request bytes (head and body),
// parsed by the transport's parser (server/http_request.h) and handed to server::Api with an
// in-memory Exchange. Contract: every request is answered exactly once (a reply, or a stream
// that ends), never with a 5xx other than 503 (a 500 is wick's own failure), and a JSON reply is
// valid JSON. The served model is the tiny one with an embedder, a reranker and a registered
// state, and small limits (prompt 512 tokens, max_tokens 16, 4 choices) so any request is quick.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_models.h"
#include "fuzz/fuzz_target.h"
#include "server/api.h"
#include "server/http_request.h"
#include "wick/engine.h"
#include "wick/synth.h"

namespace wick::fuzz {
namespace {

class MemoryExchange final : public server::Exchange {
 public:
  void reply(server::HttpReply r) override {
    std::lock_guard<std::mutex> lock(m_);
    ++answers_;
    if (answers_ == 1) reply_ = std::move(r);
    done_ = true;
    cv_.notify_all();
  }
  void start_stream(server::HttpReply head, std::string) override {
    std::lock_guard<std::mutex> lock(m_);
    ++answers_;
    if (answers_ == 1) reply_ = std::move(head);
    streaming_ = true;
  }
  bool send(std::string) override { return true; }
  void end() override {
    std::lock_guard<std::mutex> lock(m_);
    done_ = true;
    cv_.notify_all();
  }
  void abort() override { end(); }
  void on_disconnect(std::function<void()>) override {}
  bool gone() const override { return false; }

  // The reply once the request is answered; violation after `limit`.
  server::HttpReply wait(std::chrono::seconds limit, bool* streamed) {
    std::unique_lock<std::mutex> lock(m_);
    if (!cv_.wait_for(lock, limit, [&] { return done_; }))
      violated("no answer within " + std::to_string(limit.count()) + " s");
    WICK_FUZZ_EXPECT(answers_ == 1, "answered " + std::to_string(answers_) + " times");
    *streamed = streaming_;
    return reply_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  server::HttpReply reply_;
  int answers_ = 0;
  bool done_ = false, streaming_ = false;
};

struct Server {
  server::ServeContext ctx;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::Api> api;
  Server() {
    ctx.tokenizer = byte_tokenizer();
    ctx.served_id = "tiny";
    ctx.fingerprint = tiny_model().info().fingerprint;
    ctx.limits.max_prompt_tokens = 512;
    ctx.limits.max_tokens_limit = 16;
    ctx.limits.max_n = 4;
    EngineOptions eo;
    eo.max_rows = 4;
    eo.queue_length = 64;
    eo.cache_bytes = size_t{4} << 20;
    engine = std::make_unique<Engine>(tiny_model(), *ctx.tokenizer, eo);
    State warm = tiny_model().new_state();
    tiny_model().forward(ctx.tokenizer->encode("A registered state. "), warm);
    engine->register_state("warm", warm);
    ctx.state_sources["warm"] = "fuzz";
    ctx.engine = engine.get();
    ctx.embedder.emplace(Embedder::plain(tiny_model(), ctx.tokenizer));
    const std::string head = scratch_folder() + "/http-rerank-head.safetensors";
    write_synthetic_reranker_head(head, tiny_model().geometry(), 1, 5, 7);
    ctx.reranker.emplace(Reranker::load(tiny_model(), ctx.tokenizer, head));
    api = std::make_unique<server::Api>(ctx);
  }
};

}  // namespace

void check_http(Bytes in) {
  static Server s;
  std::optional<server::HttpRequest> req =
      server::parse_http_request(as_text(in), 64 * 1024, 1 << 20);
  if (!req) return;  // the transport answers 400 / 413 and closes
  auto ex = std::make_shared<MemoryExchange>();
  s.api->handle(std::move(*req), ex);
  bool streamed = false;
  const server::HttpReply r = ex->wait(std::chrono::seconds(60), &streamed);
  if (std::getenv("WICK_FUZZ_VERBOSE"))
    std::fprintf(stderr, "  -> %d %s\n", r.status, r.body.substr(0, 160).c_str());
  WICK_FUZZ_EXPECT(r.status >= 200 && r.status < 600, "status " + std::to_string(r.status));
  WICK_FUZZ_EXPECT(r.status < 500 || r.status == 503,
                   "status " + std::to_string(r.status) + " (wick's own failure): " + r.body);
  if (!streamed && r.content_type.rfind("application/json", 0) == 0 && !r.body.empty())
    WICK_FUZZ_EXPECT(nlohmann::json::accept(r.body), "a JSON reply that does not parse: " + r.body);
}

}  // namespace wick::fuzz
