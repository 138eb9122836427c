// The socket-free API layer of `wick serve` (server/api.h): the chat template, field validation
// and the error objects, and a chat completion through the router equal to generate() - driven
// with an in-memory Exchange, no network.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/chat_template.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"

namespace wick::server {
namespace {

using nlohmann::json;

// Records what the handler answers.
class MemoryExchange final : public Exchange {
 public:
  void reply(HttpReply r) override {
    std::lock_guard<std::mutex> lock(m_);
    reply_ = std::move(r);
    answered_on_ = std::this_thread::get_id();
    done_ = true;
    cv_.notify_all();
  }
  void start_stream(HttpReply head, std::string) override {
    std::lock_guard<std::mutex> lock(m_);
    reply_ = std::move(head);
    streamed_ = reply_.body;
  }
  bool send(std::string data) override {
    std::lock_guard<std::mutex> lock(m_);
    streamed_ += data;
    return true;
  }
  void end() override {
    std::lock_guard<std::mutex> lock(m_);
    done_ = true;
    cv_.notify_all();
  }
  void on_disconnect(std::function<void()>) override {}
  bool gone() const override { return false; }
  void abort() override { end(); }

  HttpReply wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return done_; });
    return reply_;
  }
  std::string streamed() {
    std::lock_guard<std::mutex> lock(m_);
    return streamed_;
  }
  std::thread::id answered_on() {
    std::lock_guard<std::mutex> lock(m_);
    return answered_on_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  HttpReply reply_;
  std::string streamed_;
  bool done_ = false;
  std::thread::id answered_on_;
};

HttpRequest post(std::string path, std::string body) {
  HttpRequest r;
  r.method = "POST";
  r.target = r.path = std::move(path);
  r.body = std::move(body);
  return r;
}

TEST(ChatTemplate, WorldFormatCleansMessagesAndMarksBoundaries) {
  ChatTemplate t;
  const RenderedChat c = t.render({{"system", " Be brief.\r\n\r\nAlways. "},
                                   {"user", "Hi"},
                                   {"assistant", "Hello!"},
                                   {"user", "More\n\n\nplease"}});
  EXPECT_EQ(c.prompt,
            "System: Be brief.\nAlways.\n\nUser: Hi\n\nAssistant: Hello!\n\nUser: More\nplease"
            "\n\nAssistant:");
  ASSERT_EQ(c.boundaries.size(), 4u);
  EXPECT_EQ(c.prompt.substr(0, c.boundaries[0]), "System: Be brief.\nAlways.\n\n");
  EXPECT_FALSE(c.continues);
  // A last assistant message is continued, not closed.
  const RenderedChat cont = t.render({{"user", "Hi"}, {"assistant", "Well,"}});
  EXPECT_EQ(cont.prompt, "User: Hi\n\nAssistant: Well,");
  EXPECT_TRUE(cont.continues);
  EXPECT_THROW(t.render({{"wizard", "x"}}), InputError);
  EXPECT_NE(t.render({{"user", "a"}}).prompt, t.render({{"user", "b"}}).prompt);
}

TEST(ChatTemplate, LoadsAFileAndRefusesBadOnes) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/tmpl.json", bad = dir + "/bad.json";
  test::write_file(good, R"({"roles": {"user": "Q", "assistant": "A"}, "record": "<{role}> {content}",
                           "sep": "\n", "prefix": "<A>", "stop": ["\n<Q>"], "clean": false})");
  const ChatTemplate t = ChatTemplate::load(good);
  EXPECT_EQ(t.render({{"user", "x\n\ny"}}).prompt, "<Q> x\n\ny\n<A>");
  EXPECT_EQ(t.stop, std::vector<std::string>{"\n<Q>"});
  // Roles alone: the reply prefix and the stops follow them.
  test::write_file(good, R"({"roles": {"user": "Q", "assistant": "A"}})");
  const ChatTemplate roles = ChatTemplate::load(good);
  EXPECT_EQ(roles.render({{"user", "hi"}}).prompt, "Q: hi\n\nA:");
  EXPECT_EQ(roles.stop, (std::vector<std::string>{"\n\n", "\nQ:"}));
  test::write_file(bad, R"({"record": "{role} without content"})");
  EXPECT_THROW(ChatTemplate::load(bad), InputError);
  test::write_file(bad, "not json");
  EXPECT_THROW(ChatTemplate::load(bad), InputError);
  EXPECT_THROW(ChatTemplate::load(dir + "/missing.json"), FileError);
}

struct TinyServer {
  ByteTokenizer tok;
  ServeContext ctx;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Api> api;
  TinyServer() {
    ctx.tokenizer = std::make_shared<ByteTokenizer>();
    ctx.served_id = "tiny";
    engine = std::make_unique<Engine>(Model::load_default(), *ctx.tokenizer);
    ctx.engine = engine.get();
    api = std::make_unique<Api>(ctx);
  }
  HttpReply call(HttpRequest r, std::string* streamed = nullptr,
                 std::thread::id* answered_on = nullptr) {
    auto ex = std::make_shared<MemoryExchange>();
    api->handle(std::move(r), ex);
    HttpReply out = ex->wait();
    if (streamed) *streamed = ex->streamed();
    if (answered_on) *answered_on = ex->answered_on();
    return out;
  }
};

TEST(ServerApi, ChatCompletionEqualsGenerate) {
  TinyServer s;
  const HttpReply r = s.call(post("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "Hello"}], "max_tokens": 12, "seed": 4, "temperature": 1})"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  GenerationConfig c;
  c.max_tokens = 12;
  c.stop_strings = {"\n\n", "\nUser:"};
  c.sampling.temperature = 1;
  c.sampling.seed = 4;
  std::string ref = generate(Model::load_default(), s.tok, "User: Hello\n\nAssistant:", c).text;
  if (!ref.empty() && ref[0] == ' ') ref.erase(0, 1);
  EXPECT_EQ(j["choices"][0]["message"]["content"], utf8_replace_invalid(ref));
  // Streamed: the same text in SSE chunks, then [DONE].
  std::string sse;
  const HttpReply head = s.call(post("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "Hello"}], "max_tokens": 12, "seed": 4, "temperature": 1, "stream": true})"), &sse);
  EXPECT_EQ(head.content_type, "text/event-stream");
  std::string text;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string data = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    for (const auto& ch : chunk["choices"])
      if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, j["choices"][0]["message"]["content"]);
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos);
  // Another seed, another text.
  const HttpReply other = s.call(post("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "Hello"}], "max_tokens": 12, "seed": 5, "temperature": 1})"));
  EXPECT_NE(json::parse(other.body)["choices"][0]["message"]["content"],
            j["choices"][0]["message"]["content"]);
}

TEST(ServerApi, ErrorsAreOpenAIObjectsNamingTheField) {
  TinyServer s;
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{", 400, ""},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})",
       400, "top_p"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "sampler": "chatrwkv", "repetition_penalty": 1.2})",
       400, "repetition_penalty"},
      {"/v1/completions", R"({"prompt": [300]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": "x", "echo": true, "logprobs": 2})", 400, "echo"},
      {"/v1/embeddings", R"({"input": "x"})", 404, "model"},
      {"/v1/rerank", R"({"query": "x", "documents": ["a"]})", 404, "model"},
      {"/nowhere", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    const HttpReply r = s.call(post(c.path, c.body));
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body << " -> " << r.body;
    const json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["param"].is_null() ? "" : e["param"].get<std::string>(), c.param) << c.body;
    EXPECT_FALSE(e["message"].get<std::string>().empty());
  }
  HttpRequest get;
  get.method = "GET";
  get.path = get.target = "/v1/chat/completions";
  EXPECT_EQ(s.call(get).status, 405);
  HttpRequest head;
  head.method = "HEAD";
  head.path = head.target = "/health";
  EXPECT_EQ(s.call(head).status, 200);
  s.ctx.api_key = "k";
  EXPECT_EQ(s.call(post("/nowhere", "{}")).status, 401) << "unknown routes need the key too";
  get.path = get.target = "/health";
  EXPECT_EQ(s.call(get).status, 200) << "/health needs none";
  s.ctx.api_key.clear();
  s.ctx.draining = true;
  get.path = get.target = "/health";
  EXPECT_EQ(s.call(get).status, 503);
  EXPECT_EQ(s.call(post("/v1/completions", R"({"prompt": "x"})")).status, 503);
}

// The router runs on the transport's one I/O thread: a route that parses a body (up to
// --max-body-bytes of JSON, tokenized) must answer from another thread, never the caller's.
TEST(ServerApi, BodyParsingRoutesAnswerOffTheCallingThread) {
  TinyServer s;
  const std::string text(1 << 20, 'a');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/tokenize", json{{"content", text}, {"with_pieces", false}}.dump()},
      {"/detokenize", json{{"tokens", std::vector<int>(1 << 18, 97)}}.dump()},
      {"/v1/embeddings", R"({"input": "x"})"},   // 404 (no embedding model), still off-thread
      {"/v1/rerank", R"({"query": "x", "documents": ["a"]})"},
      {"/tokenize", "{"},                        // a parse error is answered there too
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 1})"},
  };
  for (const auto& [path, body] : cases) {
    std::thread::id on;
    const HttpReply r = s.call(post(path, body), nullptr, &on);
    EXPECT_NE(on, std::this_thread::get_id()) << path << " answered on the calling thread";
    EXPECT_NE(r.status, 500) << path << ": " << r.body;
  }
  // GET routes need no parsing: answered at once.
  HttpRequest get;
  get.method = "GET";
  get.path = get.target = "/health";
  std::thread::id on;
  EXPECT_EQ(s.call(get, nullptr, &on).status, 200);
  EXPECT_EQ(on, std::this_thread::get_id());
}

TEST(ServerApi, TokenizeWithPiecesIsBoundedByMaxPromptTokens) {
  TinyServer s;
  s.ctx.limits.max_prompt_tokens = 4;
  const HttpReply ok = s.call(post("/tokenize", R"({"content": "h\u00e9", "with_pieces": true})"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body),
            json::parse(R"({"tokens": [{"id": 104, "piece": "h"}, {"id": 195, "piece": "\ufffd"},
                                       {"id": 169, "piece": "\ufffd"}]})"));
  const HttpReply big = s.call(post("/tokenize", R"({"content": "hello", "with_pieces": true})"));
  EXPECT_EQ(big.status, 400);
  const json e = json::parse(big.body)["error"];
  EXPECT_EQ(e["param"], "with_pieces");
  EXPECT_NE(e["message"].get<std::string>().find("--max-prompt-tokens"), std::string::npos);
  // Without pieces, only the body limit bounds it.
  const HttpReply plain = s.call(post("/tokenize", R"({"content": "hello"})"));
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(json::parse(plain.body)["tokens"], json::parse("[104, 101, 108, 108, 111]"));
}

// n x max_tokens x (1 + top_logprobs) is bounded: a request past it is a 400 naming the field
// (max_tokens given) or n (nothing fits), before any row runs.
TEST(ServerApi, LogprobVolumeIsBounded) {
  TinyServer s;
  s.ctx.limits.max_tokens_limit = 1 << 24;
  struct Case {
    std::string path, body, param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "n": 64, "max_tokens": 65536,
           "logprobs": true, "top_logprobs": 20})", "max_tokens"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 3000000,
           "logprobs": true})", "max_completion_tokens"},
      {"/v1/completions", R"({"prompt": ["a", "b"], "n": 4, "max_tokens": 300000, "logprobs": 5})",
       "max_tokens"},
  };
  for (const Case& c : cases) {
    const HttpReply r = s.call(post(c.path, c.body));
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    const json e = json::parse(r.body)["error"];
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find("2097152"), std::string::npos) << r.body;
  }
  EXPECT_EQ(s.ctx.engine->stats().running, 0);
  // Within the bound: answered, with every entry.
  const HttpReply ok = s.call(post("/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "x"}], "n": 2, "max_tokens": 4,
          "logprobs": true, "top_logprobs": 20, "temperature": 0})"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  const json body = json::parse(ok.body);
  ASSERT_EQ(body["choices"].size(), 2u);
  for (const auto& c : body["choices"]) {
    EXPECT_GE(c["logprobs"]["content"].size(), 1u);
    EXPECT_LE(c["logprobs"]["content"].size(), 4u);
    for (const auto& t : c["logprobs"]["content"]) EXPECT_EQ(t["top_logprobs"].size(), 20u);
  }
}

// `speculative: {"n_max": k}` (docs/serving.md §3.1): validated, the text equal to plain decoding,
// the counters in usage and in /metrics.
TEST(ServerApi, SpeculativeFieldIsValidatedExactAndCounted) {
  TinyServer s;
  const std::string base =
      R"("prompt": "Once upon a time, there was a girl. Once upon a time", "max_tokens": 60,
         "seed": 3, "temperature": 0.5, "logprobs": 2)";
  const HttpReply plain = s.call(post("/v1/completions", "{" + base + "}"));
  const HttpReply spec =
      s.call(post("/v1/completions", "{" + base + R"(, "speculative": {"n_max": 8}})"));
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(spec.status, 200) << spec.body;
  const json p = json::parse(plain.body), q = json::parse(spec.body);
  EXPECT_EQ(q["choices"][0]["text"], p["choices"][0]["text"]);
  EXPECT_EQ(q["choices"][0]["logprobs"], p["choices"][0]["logprobs"]);
  EXPECT_FALSE(p["usage"].contains("speculative"));
  const json& counters = q["usage"]["speculative"];
  EXPECT_GT(counters["drafted"].get<int>(), 0) << q["usage"];
  EXPECT_GT(counters["accepted"].get<int>(), 0) << q["usage"];
  EXPECT_GE(counters["drafted"].get<int>(), counters["accepted"].get<int>());
  EXPECT_GT(counters["passes"].get<int>(), 0);
  // Another seed, another text (the equality above can fail).
  const HttpReply other = s.call(post(
      "/v1/completions", R"({"prompt": "Once upon a time, there was a girl. Once upon a time",
      "max_tokens": 60, "seed": 4, "temperature": 0.5, "speculative": {"n_max": 8}})"));
  EXPECT_NE(json::parse(other.body)["choices"][0]["text"], q["choices"][0]["text"]);
  // The chat endpoint takes it too.
  const HttpReply chat = s.call(post("/v1/chat/completions", R"({"messages": [{"role": "user",
      "content": "Hello Hello Hello"}], "max_tokens": 8, "speculative": {"n_max": 4}})"));
  EXPECT_EQ(chat.status, 200) << chat.body;
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("speculative": 4)", "speculative"},
           {R"("speculative": [4])", "speculative"},
           {R"("speculative": {})", "speculative.n_max"},
           {R"("speculative": {"n_max": 0})", "speculative.n_max"},
           {R"("speculative": {"n_max": 65})", "speculative.n_max"},
           {R"("speculative": {"n_max": "4"})", "speculative.n_max"},
           {R"("speculative": {"n_max": 2.5})", "speculative.n_max"}}) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
      const std::string prompt = std::string(path) == "/v1/completions"
                                     ? R"("prompt": "x", )"
                                     : R"("messages": [{"role": "user", "content": "x"}], )";
      const HttpReply r = s.call(post(path, "{" + prompt + body + "}"));
      EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
      const json e = json::parse(r.body)["error"];
      EXPECT_EQ(e["param"], param) << r.body;
      EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
    }
  }
  HttpRequest metrics;
  metrics.method = "GET";
  metrics.path = metrics.target = "/metrics";
  const HttpReply m = s.call(metrics);
  ASSERT_EQ(m.status, 200);
  auto value = [&](const std::string& name) {
    const size_t at = m.body.find("\n" + name + " ");
    if (at == std::string::npos) return -1.0;
    return std::stod(m.body.substr(at + name.size() + 2));
  };
  EXPECT_GE(value("wick_spec_drafted_total"), counters["drafted"].get<double>()) << m.body;
  EXPECT_GE(value("wick_spec_accepted_total"), counters["accepted"].get<double>()) << m.body;
}

}  // namespace
}  // namespace wick::server
