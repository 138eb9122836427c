// The socket-free API layer of `wick serve` (server/api.h): the chat template, field validation
// and the error objects, and a chat completion through the router equal to generate() - driven
// with an in-memory Exchange, no network.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/api.h"
#include "server/chat_template.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick::server {
namespace {

using nlohmann::json;

// Records what the handler answers.
class MemoryExchange final : public Exchange {
 public:
  void reply(HttpReply r) override {
    std::lock_guard<std::mutex> lock(m_);
    reply_ = std::move(r);
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

 private:
  std::mutex m_;
  std::condition_variable cv_;
  HttpReply reply_;
  std::string streamed_;
  bool done_ = false;
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
  HttpReply call(HttpRequest r, std::string* streamed = nullptr) {
    auto ex = std::make_shared<MemoryExchange>();
    api->handle(std::move(r), ex);
    HttpReply out = ex->wait();
    if (streamed) *streamed = ex->streamed();
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

}  // namespace
}  // namespace wick::server
