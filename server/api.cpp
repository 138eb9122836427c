#include "server/api.h"

#include <cstring>

#include "server/api_error.h"
#include "server/chat_page.h"
#include "server/completions.h"
#include "server/json_fields.h"
#include "wick/errors.h"

namespace wick::server {

namespace {

// Equal strings in time that depends only on the length of `expected`.
bool same_secret(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

std::string base64(const void* data, size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0) |
                       (i + 2 < n ? uint32_t{p[i + 2]} : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string route_name(const std::string& path) {
  std::string p = path;
  if (p.rfind("/v1/", 0) == 0) p = p.substr(3);
  if (p == "/chat/completions") return "chat_completions";
  if (p == "/completions") return "completions";
  if (p == "/embeddings") return "embeddings";
  if (p == "/rerank" || p == "/reranking") return "rerank";
  if (p == "/models") return "models";
  if (p == "/states") return "states";
  if (p == "/adapters") return "adapters";
  if (path == "/tokenize") return "tokenize";
  if (path == "/detokenize") return "detokenize";
  if (path == "/health") return "health";
  if (path == "/metrics") return "metrics";
  if (path == "/" || path == "/index.html") return "page";
  return "other";
}

const char* method_of(const std::string& route) {
  if (route == "models" || route == "states" || route == "adapters" || route == "health" || route == "metrics" ||
      route == "page")
    return "GET";
  return "POST";
}

}  // namespace

void answer_loading(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  if (req.path == "/health") {
    HttpReply r;
    r.status = 503;
    r.body = R"({"status":"loading"})";
    r.headers.emplace_back("Retry-After", "1");
    ex->reply(std::move(r));
    return;
  }
  ex->reply(error_reply(unavailable("the model is still loading; retry shortly")));
}

Api::Api(ServeContext& ctx) : ctx_(ctx) {}

void Api::reply_json(const std::shared_ptr<Exchange>& ex, std::string_view endpoint, int status,
                     std::string body) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  r.headers = cors_headers(ctx_);
  ctx_.metrics.request(endpoint, status);
  ex->reply(std::move(r));
}

void Api::handle(HttpRequest&& req, const std::shared_ptr<Exchange>& ex) {
  const std::string endpoint = route_name(req.path);
  try {
    route(req, ex, endpoint);
  } catch (...) {
    answer_error(std::current_exception(), endpoint, ex);
  }
}

void Api::answer_error(std::exception_ptr e, std::string_view endpoint,
                       const std::shared_ptr<Exchange>& ex) {
  ApiError err(500, "server_error", "internal error");
  try {
    std::rethrow_exception(e);
  } catch (const ApiError& a) {
    err = a;
  } catch (const InputError& a) {
    err = bad_request("", a.what());
  } catch (const std::bad_alloc&) {
    err = unavailable("out of memory while handling the request");
  } catch (const std::exception& a) {
    err = ApiError(500, "server_error", std::string("internal error: ") + a.what());
  } catch (...) {
  }
  HttpReply r = error_reply(err);
  for (auto& h : cors_headers(ctx_)) r.headers.push_back(std::move(h));
  ctx_.metrics.request(endpoint, err.status());
  ex->reply(std::move(r));
}

void Api::off_io(const std::string& endpoint, const std::shared_ptr<Exchange>& ex,
                 std::function<void()> work) {
  const bool posted = parser_.post([this, endpoint, ex, work = std::move(work)] {
    try {
      work();
    } catch (...) {
      answer_error(std::current_exception(), endpoint, ex);
    }
  });
  if (!posted) throw unavailable("the server is busy: too many requests are being parsed");
}

void Api::check_key(const HttpRequest& req) const {
  if (ctx_.api_key.empty()) return;
  const std::string* auth = req.header("authorization");
  std::string_view given;
  if (auth && auth->size() > 7 && strncasecmp(auth->c_str(), "Bearer ", 7) == 0)
    given = std::string_view(*auth).substr(7);
  if (!same_secret(given, ctx_.api_key)) {
    ApiError e(401, "authentication_error",
               auth ? "the API key is not valid for this server"
                    : "an API key is required: send 'Authorization: Bearer KEY'",
               "", "invalid_api_key");
    e.headers.emplace_back("WWW-Authenticate", "Bearer");
    throw e;
  }
}

void Api::route(HttpRequest& req, const std::shared_ptr<Exchange>& ex,
                const std::string& endpoint) {
  // CORS preflight (only with --cors-origin).
  if (req.method == "OPTIONS") {
    if (ctx_.cors_origin.empty())
      throw ApiError(405, "invalid_request_error",
                     "OPTIONS (CORS preflight) is not served: start wick serve with "
                     "--cors-origin ORIGIN to allow a browser origin");
    const std::string* origin = req.header("origin");
    if (!origin || *origin != ctx_.cors_origin)
      throw ApiError(403, "invalid_request_error",
                     "origin '" + (origin ? *origin : std::string()) +
                         "' is not allowed (this server allows " + ctx_.cors_origin + ")");
    HttpReply r;
    r.status = 204;
    r.content_type.clear();
    r.headers = {{"Access-Control-Allow-Origin", ctx_.cors_origin},
                 {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                 {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                 {"Access-Control-Max-Age", "600"},
                 {"Vary", "Origin"}};
    ctx_.metrics.request(endpoint, 204);
    ex->reply(std::move(r));
    return;
  }
  const bool public_route = endpoint == "health" || endpoint == "page";
  if (!public_route) check_key(req);
  if (endpoint == "other")
    throw not_found("", "no endpoint " + req.method + " " + req.path +
                            " (see GET /v1/models, POST /v1/chat/completions, /v1/completions)");
  // HEAD is GET without the body (the transport drops it).
  const bool head_of_get = req.method == "HEAD" && std::string_view(method_of(endpoint)) == "GET";
  if (req.method != method_of(endpoint) && !head_of_get) {
    ApiError e(405, "invalid_request_error",
               req.path + " takes " + method_of(endpoint) + ", not " + req.method);
    e.headers.emplace_back("Allow", method_of(endpoint));
    throw e;
  }
  if (endpoint == "health") {
    HttpReply r;
    if (ctx_.draining.load()) {
      r.status = 503;
      r.body = R"({"status":"draining"})";
      r.headers.emplace_back("Retry-After", "1");
    } else {
      r.body = R"({"status":"ok"})";
    }
    ctx_.metrics.request(endpoint, r.status);
    ex->reply(std::move(r));
    return;
  }
  if (endpoint == "page") {
    HttpReply r;
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(chat_page_html());
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; script-src 'unsafe-inline'; style-src "
                           "'unsafe-inline'; connect-src 'self'");
    ctx_.metrics.request(endpoint, 200);
    ex->reply(std::move(r));
    return;
  }
  if (endpoint == "metrics") {
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = ctx_.metrics.scrape(ctx_.engine, ctx_.draining.load());
    ctx_.metrics.request(endpoint, 200);
    ex->reply(std::move(r));
    return;
  }
  if (endpoint == "models") {
    Json data = Json::array();
    data.push_back({{"id", ctx_.served_id},
                    {"object", "model"},
                    {"created", ctx_.created},
                    {"owned_by", "wick"},
                    {"meta", {{"fingerprint", ctx_.fingerprint},
                              {"vocab", ctx_.tokenizer->vocab_size()},
                              {"chat", ctx_.engine != nullptr},
                              {"embeddings", ctx_.embedder.has_value()},
                              {"rerank", ctx_.reranker.has_value()}}}});
    return reply_json(ex, endpoint, 200, dump_json({{"object", "list"}, {"data", data}}));
  }
  if (endpoint == "states") {
    Json data = Json::array();
    for (const auto& [id, source] : ctx_.state_sources)
      data.push_back({{"id", id}, {"object", "state"}, {"name", id}, {"source", source}});
    return reply_json(ex, endpoint, 200, dump_json({{"object", "list"}, {"data", data}}));
  }
  if (endpoint == "adapters") {
    Json data = Json::array();
    for (size_t i = 0; i < ctx_.adapters.size(); ++i) {
      const ServedAdapter& a = ctx_.adapters[i];
      data.push_back({{"id", a.id},
                      {"object", "adapter"},
                      {"index", i},
                      {"source", a.source},
                      {"rank", a.adapter->rank()},
                      {"alpha", a.adapter->alpha()},
                      {"scale", a.adapter->lora_scale()},
                      {"adapted", a.adapter->adapted().size()},
                      {"replaced", a.adapter->replaced()},
                      {"parameters", a.adapter->parameters()},
                      {"fingerprint", a.adapter->fingerprint()}});
    }
    return reply_json(ex, endpoint, 200, dump_json({{"object", "list"}, {"data", data}}));
  }
  // Everything below parses a body (up to --max-body-bytes): on the parse thread.
  if (endpoint == "tokenize")
    return off_io(endpoint, ex, [this, ex, body = std::move(req.body)] { tokenize(body, ex); });
  if (endpoint == "detokenize")
    return off_io(endpoint, ex, [this, ex, body = std::move(req.body)] { detokenize(body, ex); });
  if (ctx_.draining.load()) throw unavailable("the server is shutting down");
  if (endpoint == "chat_completions")
    return off_io(endpoint, ex, [this, ex, r = std::move(req)] {
      handle_chat_completions(ctx_, r, ex);
    });
  if (endpoint == "completions")
    return off_io(endpoint, ex, [this, ex, r = std::move(req)] { handle_completions(ctx_, r, ex); });
  if (endpoint == "embeddings")
    return off_io(endpoint, ex, [this, ex, body = std::move(req.body)] { embeddings(body, ex); });
  if (endpoint == "rerank")
    return off_io(endpoint, ex, [this, ex, body = std::move(req.body)] { rerank(body, ex); });
  throw not_found("", "no endpoint " + req.path);
}

void Api::tokenize(const std::string& body, const std::shared_ptr<Exchange>& ex) {
  const Json b = parse_body(body);
  const auto content = opt_string(b, "content");
  if (!content) throw bad_request("content", "'content' is required: the text to tokenize");
  const bool with_pieces = opt_bool(b, "with_pieces").value_or(false);
  const std::vector<int32_t> ids = ctx_.tokenizer->encode(*content);
  // One {id, piece} object per token is ~10x the text: bounded by --max-prompt-tokens (the
  // plain id list is bounded by the body limit).
  if (with_pieces && static_cast<int64_t>(ids.size()) > ctx_.limits.max_prompt_tokens)
    throw bad_request("with_pieces",
                      "'with_pieces' answers at most " +
                          std::to_string(ctx_.limits.max_prompt_tokens) +
                          " tokens (wick serve --max-prompt-tokens); the content is " +
                          std::to_string(ids.size()) +
                          " tokens: send it without with_pieces, or in parts");
  // Written directly: no JSON object per token.
  std::string out = "{\"tokens\":[";
  out.reserve(16 + ids.size() * (with_pieces ? 24 : 6));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    if (!with_pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":";
    out += dump_json(utf8_replace_invalid(
        ctx_.tokenizer->decode(std::span<const int32_t>(&ids[i], 1))));
    out += '}';
  }
  out += "]}";
  reply_json(ex, "tokenize", 200, std::move(out));
}

void Api::detokenize(const std::string& body, const std::shared_ptr<Exchange>& ex) {
  const Json b = parse_body(body);
  const Json* t = field(b, "tokens");
  if (!t || !t->is_array())
    throw bad_request("tokens", "'tokens' is required: an array of token ids");
  const std::vector<int32_t> ids = token_ids(*t, "tokens", "tokens", ctx_.tokenizer->vocab_size());
  std::string text;
  try {
    text = utf8_replace_invalid(ctx_.tokenizer->decode(ids));
  } catch (const InputError& e) {
    throw bad_request("tokens", e.what());
  }
  reply_json(ex, "detokenize", 200, dump_json({{"content", text}}));
}

void Api::embeddings(const std::string& body, const std::shared_ptr<Exchange>& ex) {
  if (!ctx_.embedder)
    throw not_found("model", "this server has no embedding model: serve an EmbeddingRWKV "
                             "checkpoint, or give an embedding head with --head FILE");
  const Json b = parse_body(body);
  (void)opt_string(b, "model");
  const std::string format = opt_string(b, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("encoding_format",
                      "'encoding_format' must be \"float\" or \"base64\", found \"" + format + "\"");
  if (field(b, "dimensions"))
    throw bad_request("dimensions", "'dimensions' is not supported: the vectors have the model's "
                                    "width (" + std::to_string(ctx_.embedder->dim()) + ")");
  const Json* in = field(b, "input");
  if (!in) throw bad_request("input", "'input' is required: a string, strings or token ids");
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  // The embedding model's rows, not the tokenizer's: EmbeddingRWKV's EOS (65535) lies past the
  // World vocabulary, and token-id inputs must end with it.
  const int vocab = ctx_.embedder->model().geometry().vocab;
  auto id_array = [&](const Json& a, const std::string& name) {
    std::vector<int32_t> out = token_ids(a, name, "input", vocab);
    if (out.empty()) throw bad_request("input", "'" + name + "' holds no token ids");
    if (static_cast<int64_t>(out.size()) > ctx_.limits.max_prompt_tokens)
      throw bad_request("input", "'" + name + "' is " + std::to_string(out.size()) +
                                     " tokens, above this server's limit of " +
                                     std::to_string(ctx_.limits.max_prompt_tokens) +
                                     " (wick serve --max-prompt-tokens)");
    return out;
  };
  if (in->is_string()) {
    texts.push_back(in->get<std::string>());
  } else if (in->is_array() && !in->empty()) {
    if ((*in)[0].is_number()) {
      ids.push_back(id_array(*in, "input"));
    } else {
      for (size_t i = 0; i < in->size(); ++i) {
        const Json& e = (*in)[i];
        if ((*in)[0].is_string() && e.is_string()) {
          texts.push_back(e.get<std::string>());
        } else if ((*in)[0].is_array() && e.is_array()) {
          ids.push_back(id_array(e, "input[" + std::to_string(i) + "]"));
        } else {
          throw bad_request("input", "'input' must be a string, strings, token ids or token-id "
                                     "arrays; element " + std::to_string(i) + " is " +
                                         json_type(e));
        }
      }
    }
  } else {
    throw bad_request("input", "'input' must be a non-empty string, strings or token ids, found " +
                                   json_type(*in));
  }
  if (texts.size() + ids.size() > 2048)
    throw bad_request("input", "'input' holds more than 2048 items");
  int64_t tokens = 0;
  try {
    for (const std::string& t : texts) {
      const size_t n = ctx_.embedder->tokens(t).size();
      if (static_cast<int64_t>(n) > ctx_.limits.max_prompt_tokens)
        throw bad_request("input", "an input is " + std::to_string(n) +
                                       " tokens, above this server's limit of " +
                                       std::to_string(ctx_.limits.max_prompt_tokens) +
                                       " (wick serve --max-prompt-tokens)");
      tokens += static_cast<int64_t>(n);
    }
  } catch (const InputError& e) {
    throw bad_request("input", e.what());
  }
  for (const auto& v : ids) tokens += static_cast<int64_t>(v.size());
  const bool b64 = format == "base64";
  const bool posted = worker_.post([this, ex, texts = std::move(texts), ids = std::move(ids), b64,
                                    tokens] {
    try {
      const std::vector<float> vec =
          texts.empty() ? ctx_.embedder->embed_tokens(ids) : ctx_.embedder->embed(texts);
      const size_t dim = static_cast<size_t>(ctx_.embedder->dim());
      Json data = Json::array();
      for (size_t i = 0; dim > 0 && i < vec.size() / dim; ++i) {
        Json e = {{"object", "embedding"}, {"index", i}};
        if (b64) {
          e["embedding"] = base64(vec.data() + i * dim, dim * sizeof(float));  // x86: little-endian
        } else {
          e["embedding"] = std::vector<float>(vec.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                              vec.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
        }
        data.push_back(std::move(e));
      }
      ctx_.metrics.prompt_tokens(static_cast<uint64_t>(tokens));
      reply_json(ex, "embeddings", 200,
                 dump_json({{"object", "list"},
                       {"data", data},
                       {"model", ctx_.served_id},
                       {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}));
    } catch (const InputError& e) {
      ctx_.metrics.request("embeddings", 400);
      ex->reply(error_reply(bad_request("input", e.what())));
    } catch (const std::exception& e) {
      ctx_.metrics.request("embeddings", 500);
      ex->reply(error_reply(ApiError(500, "server_error", std::string("embedding failed: ") + e.what())));
    }
  });
  if (!posted) throw unavailable("the server is busy with other embedding or rerank requests");
}

void Api::rerank(const std::string& body, const std::shared_ptr<Exchange>& ex) {
  if (!ctx_.reranker)
    throw not_found("model", "this server has no reranker: give a reranker head with --head FILE");
  const Json b = parse_body(body);
  (void)opt_string(b, "model");
  const auto query = opt_string(b, "query");
  if (!query) throw bad_request("query", "'query' is required: a string");
  const Json* docs = field(b, "documents");
  if (!docs || !docs->is_array())
    throw bad_request("documents", "'documents' is required: an array of strings");
  std::vector<std::string> texts;
  for (size_t i = 0; i < docs->size(); ++i) {
    const Json& d = (*docs)[i];
    if (d.is_string()) {
      texts.push_back(d.get<std::string>());
    } else if (d.is_object() && d.contains("text") && d["text"].is_string()) {
      texts.push_back(d["text"].get<std::string>());
    } else {
      throw bad_request("documents", "'documents[" + std::to_string(i) +
                                         "]' must be a string, found " + json_type(d));
    }
  }
  if (texts.size() > 4096) throw bad_request("documents", "'documents' holds more than 4096 items");
  const int64_t top_n =
      opt_int(b, "top_n", 1, INT64_MAX).value_or(static_cast<int64_t>(texts.size()));
  const bool return_documents = opt_bool(b, "return_documents").value_or(false);
  int64_t tokens = 0;
  try {
    const size_t tail = ctx_.reranker->tail_tokens(*query).size();
    for (size_t i = 0; i < texts.size(); ++i) {
      // Each document is one pass over its tokens and the query's.
      const size_t n = ctx_.reranker->prefix_tokens(texts[i]).size() + tail;
      if (static_cast<int64_t>(n) > ctx_.limits.max_prompt_tokens)
        throw bad_request("documents", "'documents[" + std::to_string(i) + "]' with the query is " +
                                           std::to_string(n) +
                                           " tokens, above this server's limit of " +
                                           std::to_string(ctx_.limits.max_prompt_tokens) +
                                           " (wick serve --max-prompt-tokens)");
      tokens += static_cast<int64_t>(n);
    }
  } catch (const InputError& e) {
    throw bad_request("documents", e.what());
  }
  const bool posted = worker_.post([this, ex, q = *query, texts = std::move(texts), top_n,
                                    return_documents, tokens] {
    try {
      const std::vector<float> logits = ctx_.reranker->score(q, texts);
      const std::vector<RerankResult> ranked = ctx_.reranker->rank(logits);
      Json results = Json::array();
      for (size_t i = 0; i < ranked.size() && static_cast<int64_t>(i) < top_n; ++i) {
        Json r = {{"index", ranked[i].index}, {"relevance_score", ranked[i].score}};
        if (return_documents) r["document"] = {{"text", texts[static_cast<size_t>(ranked[i].index)]}};
        results.push_back(std::move(r));
      }
      ctx_.metrics.prompt_tokens(static_cast<uint64_t>(tokens));
      reply_json(ex, "rerank", 200,
                 dump_json({{"object", "list"},
                       {"model", ctx_.served_id},
                       {"results", results},
                       {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}));
    } catch (const InputError& e) {
      ctx_.metrics.request("rerank", 400);
      ex->reply(error_reply(bad_request("documents", e.what())));
    } catch (const std::exception& e) {
      ctx_.metrics.request("rerank", 500);
      ex->reply(error_reply(ApiError(500, "server_error", std::string("rerank failed: ") + e.what())));
    }
  });
  if (!posted) throw unavailable("the server is busy with other embedding or rerank requests");
}

}  // namespace wick::server
