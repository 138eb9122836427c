// The router of `wick serve` (serving.md §3): authentication, CORS, draining, and every endpoint
// but the generation ones (completions.h). Socket-free: it takes an HttpRequest and answers
// through an Exchange, so tests and fuzzers drive it without a network.
//
// Routes: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/rerank, /tokenize,
// /detokenize; GET /v1/models, /v1/states, /health, /metrics, / (the chat page). The /v1 prefix
// is optional on the OpenAI routes (as llama-server accepts). A wrong method is a 405, an unknown
// path a 404, both as OpenAI error objects.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/background.h"
#include "server/http.h"
#include "server/serve_context.h"

namespace wick::server {

// The answer while the model is still loading (before an Api exists): /health 503
// {"status":"loading"}, everything else 503 service_unavailable_error, both with Retry-After.
void answer_loading(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);

class Api {
 public:
  explicit Api(ServeContext& ctx);
  // Never throws: every failure becomes an error reply.
  void handle(HttpRequest&& req, const std::shared_ptr<Exchange>& ex);

 private:
  // Throws 401 unless the request carries the API key (when one is set).
  void check_key(const HttpRequest& req) const;
  void route(HttpRequest& req, const std::shared_ptr<Exchange>& ex, const std::string& endpoint);
  // Runs `work` on the parse thread, never on the I/O thread (which serves every connection):
  // parsing, tokenizing and serializing a request's answer happen there; an exception `work`
  // throws answers the request. 503 when too many requests already wait to be parsed.
  void off_io(const std::string& endpoint, const std::shared_ptr<Exchange>& ex,
              std::function<void()> work);
  void tokenize(const std::string& body, const std::shared_ptr<Exchange>& ex);
  void detokenize(const std::string& body, const std::shared_ptr<Exchange>& ex);
  void answer_error(std::exception_ptr e, std::string_view endpoint,
                    const std::shared_ptr<Exchange>& ex);
  void embeddings(const std::string& body, const std::shared_ptr<Exchange>& ex);
  void rerank(const std::string& body, const std::shared_ptr<Exchange>& ex);
  void reply_json(const std::shared_ptr<Exchange>& ex, std::string_view endpoint, int status,
                  std::string body);

  ServeContext& ctx_;
  BackgroundWorker worker_{64};    // embeddings, rerank (model passes outside the engine)
  // Every route that reads a body: parse, tokenize, validate, submit or serialize (off_io).
  BackgroundWorker parser_{1024};
};

}  // namespace wick::server
