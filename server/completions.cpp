#include "server/completions.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <mutex>
#include <random>
#include <span>
#include <string_view>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "wick/errors.h"

namespace wick::server {

namespace {

enum class Kind { kChat, kText };

struct PromptSpec {
  std::vector<int32_t> tokens;
  std::vector<size_t> boundaries;  // token counts at message ends (chat)
  std::string echo;                // text prepended to the completion (completions' echo)
  bool continues = false;          // chat: the reply continues the last assistant message
};

struct Job {
  Kind kind = Kind::kChat;
  std::vector<PromptSpec> prompts;
  int n = 1;
  bool stream = false, include_usage = false;
  int logprobs = -1;  // alternatives per token; -1: no logprobs
  GenerationConfig config;
  std::string state_id;
  std::shared_ptr<const LoraAdapter> adapter;  // the request's `lora` choice; null: none
};

std::string random_id(const char* prefix) {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%08x%08x%08x", prefix, rd(), rd(), rd());
  return buf;
}

std::string token_text(const Tokenizer& tok, int32_t id) {
  try {
    return tok.decode(std::span<const int32_t>(&id, 1));
  } catch (const InputError&) {
    return {};
  }
}

// ---- parsing ------------------------------------------------------------------------------

void refuse_unsupported(const Json& b) {
  for (const char* name : {"tools", "functions"}) {
    const Json* v = field(b, name);
    if (v && !(v->is_array() && v->empty()))
      throw bad_request(name, std::string("'") + name +
                                  "': wick serve does not do tool or function calling; send the "
                                  "request without it");
  }
  if (const Json* rf = field(b, "response_format")) {
    if (!rf->is_object())
      throw bad_request("response_format",
                        "'response_format' must be an object, found " + json_type(*rf));
    const std::string type = opt_string(*rf, "type", "response_format.type").value_or("text");
    if (type != "text")
      throw bad_request("response_format", "'response_format' type '" + type +
                                               "' is not supported: wick serve answers in "
                                               "plain text only (type \"text\")");
  }
  (void)opt_string(b, "model");
  (void)opt_string(b, "user");
  (void)opt_string(b, "prompt_cache_key");
}

std::shared_ptr<const LoraAdapter> parse_lora(const ServeContext& ctx, const Json& b);

void parse_sampling(const ServeContext& ctx, const Json& b, Job& job) {
  const int vocab = ctx.tokenizer->vocab_size();
  SamplingConfig& s = job.config.sampling;
  const std::string sampler = opt_string(b, "sampler").value_or("standard");
  try {
    s.mode = parse_sampler_mode(sampler);
  } catch (const InputError& e) {
    throw bad_request("sampler", std::string("'sampler': ") + e.what());
  }
  if (s.mode == SamplerMode::kChatRwkv) {
    s.exempt_space_digits = true;
    s.top_p = 0.85f;  // PIPELINE default when top_p is not given
  }
  s.temperature = static_cast<float>(opt_number(b, "temperature", 0, 2).value_or(1.0));
  if (auto tp = opt_number(b, "top_p", 0, 1)) {
    if (*tp == 0 && s.mode == SamplerMode::kStandard)
      throw bad_request("top_p", "'top_p' must be above 0 with the standard sampler (1 = off), "
                                 "found 0");
    s.top_p = static_cast<float>(*tp);
  }
  s.top_k = static_cast<int>(opt_int(b, "top_k", 0, vocab).value_or(0));
  s.presence_penalty = static_cast<float>(opt_number(b, "presence_penalty", -2, 2).value_or(0));
  s.frequency_penalty = static_cast<float>(opt_number(b, "frequency_penalty", -2, 2).value_or(0));
  s.penalty_decay = static_cast<float>(opt_number(b, "penalty_decay", 0, 1).value_or(1));
  if (auto rp = opt_number(b, "repetition_penalty", 0.01, 100)) {
    if (s.mode == SamplerMode::kChatRwkv && *rp != 1)
      throw bad_request("repetition_penalty",
                        "'repetition_penalty' is not part of the chatrwkv sampler (it has "
                        "presence/frequency penalties); use 1 or the standard sampler");
    s.repetition_penalty = static_cast<float>(*rp);
  }
  if (auto seed = opt_uint64(b, "seed")) {
    s.seed = *seed;
  } else {
    std::random_device rd;
    s.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  }
  if (const Json* lb = field(b, "logit_bias")) {
    if (!lb->is_object())
      throw bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias, found " +
                                          json_type(*lb));
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= vocab)
        throw bad_request("logit_bias", "'logit_bias' key '" + key +
                                            "' must be a token id in [0, " +
                                            std::to_string(vocab) + ")");
      if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < -100 ||
          it->get<double>() > 100)
        throw bad_request("logit_bias", "'logit_bias' value of token " + key +
                                            " must be a number between -100 and 100, found " +
                                            (it->is_number() ? it->dump() : json_type(*it)));
      s.logit_bias.emplace_back(static_cast<int32_t>(id), it->get<float>());
    }
  }
  if (const Json* sp = field(b, "speculative")) {
    const std::string range = "1.." + std::to_string(SpeculativeConfig::kMaxDraft);
    if (!sp->is_object())
      throw bad_request("speculative", "'speculative' must be an object {\"n_max\": k} (k: draft "
                                       "tokens verified per pass, " +
                                           range + "), found " + json_type(*sp));
    const auto k =
        opt_int(*sp, "n_max", 1, SpeculativeConfig::kMaxDraft, "speculative.n_max");
    if (!k)
      throw bad_request("speculative.n_max", "'speculative' needs 'n_max': the most draft tokens "
                                             "verified per pass, an integer " +
                                                 range);
    job.config.speculative.n_max = static_cast<int>(*k);
  }
  if (auto stop = opt_strings(b, "stop", 4)) job.config.stop_strings = *stop;
  job.config.stop_tokens = ctx.stop_tokens;
  job.n = static_cast<int>(opt_int(b, "n", 1, ctx.limits.max_n).value_or(1));
  job.stream = opt_bool(b, "stream").value_or(false);
  if (const Json* so = field(b, "stream_options")) {
    if (!so->is_object())
      throw bad_request("stream_options",
                        "'stream_options' must be an object, found " + json_type(*so));
    job.include_usage =
        opt_bool(*so, "include_usage", "stream_options.include_usage").value_or(false);
  }
  if (auto st = opt_string(b, "state")) {
    if (!ctx.state_sources.count(*st))
      throw not_found("state", "'state': no initial state '" + *st +
                                   "' is registered (GET /v1/states lists them; register with "
                                   "wick serve --state NAME=FILE)");
    job.state_id = *st;
  }
  job.adapter = parse_lora(ctx, b);
}

// `lora: [{"id": NAME or index, "scale": s}, ...]` (llama.cpp's shape): the registered adapters
// to apply and their scales (default 1). Entries of scale 0 are off; wick applies one adapter per
// request, so at most one entry may have another scale.
std::shared_ptr<const LoraAdapter> parse_lora(const ServeContext& ctx, const Json& b) {
  const Json* l = field(b, "lora");
  if (!l) return nullptr;
  auto names = [&] {
    std::string s;
    for (size_t i = 0; i < ctx.adapters.size(); ++i)
      s += (i ? ", " : "") + ctx.adapters[i].id + " (" + std::to_string(i) + ")";
    return s.empty() ? std::string("none are registered (wick serve --adapter NAME=FILE:ALPHA)")
                     : "registered: " + s;
  };
  if (!l->is_array())
    throw bad_request("lora", "'lora' must be an array of {\"id\": name or index, \"scale\": "
                              "number}, found " +
                                  json_type(*l));
  std::vector<bool> seen(ctx.adapters.size(), false);
  const ServedAdapter* chosen = nullptr;
  double chosen_scale = 0;
  size_t chosen_at = 0;
  for (size_t i = 0; i < l->size(); ++i) {
    const Json& e = (*l)[i];
    const std::string where = "lora[" + std::to_string(i) + "]";
    if (!e.is_object())
      throw bad_request(where, "'" + where + "' must be an object {\"id\": name or index, " +
                                   "\"scale\": number}, found " + json_type(e));
    const Json* id = field(e, "id");
    size_t index = ctx.adapters.size();
    if (id && id->is_string()) {
      for (size_t k = 0; k < ctx.adapters.size(); ++k)
        if (ctx.adapters[k].id == id->get<std::string>()) index = k;
    } else if (id && id->is_number_integer()) {
      const int64_t k = id->get<int64_t>();
      if (k >= 0 && static_cast<uint64_t>(k) < ctx.adapters.size()) index = static_cast<size_t>(k);
    } else {
      throw bad_request(where + ".id", "'" + where + ".id' must be an adapter name or index, found " +
                                           (id ? json_type(*id) : std::string("nothing")) +
                                           "; " + names());
    }
    if (index == ctx.adapters.size())
      throw not_found(where + ".id", "'" + where + ".id': no adapter " + id->dump() +
                                         " (GET /v1/adapters lists them); " + names());
    if (seen[index])
      throw bad_request(where + ".id", "'" + where + ".id': adapter '" + ctx.adapters[index].id +
                                           "' is listed twice");
    seen[index] = true;
    const double scale =
        opt_number(e, "scale", -100, 100, where + ".scale").value_or(1.0);
    if (scale == 0) continue;
    if (chosen)
      throw bad_request(where, "'lora': adapters '" + chosen->id + "' and '" +
                                   ctx.adapters[index].id +
                                   "' both have a scale other than 0, but wick applies one "
                                   "adapter per request; give the others scale 0 or leave them out");
    chosen = &ctx.adapters[index];
    chosen_scale = scale;
    chosen_at = i;
  }
  if (!chosen) return nullptr;
  if (chosen_scale == chosen->adapter->lora_scale()) return chosen->adapter;
  try {
    return chosen->adapter->with_scale(chosen_scale);
  } catch (const InputError& e) {
    const std::string where = "lora[" + std::to_string(chosen_at) + "].scale";
    throw bad_request(where, "'" + where + "': " + e.what());
  }
}

int64_t max_tokens_field(const ServeContext& ctx, const Json& b, const char* name,
                         int64_t fallback) {
  const auto v = opt_int(b, name, INT64_MIN, INT64_MAX);
  if (!v) return fallback;
  if (*v < 1)
    throw bad_request(name, std::string("'") + name + "' must be at least 1, found " +
                                std::to_string(*v));
  if (*v > ctx.limits.max_tokens_limit)
    throw bad_request(name, std::string("'") + name + "' is " + std::to_string(*v) +
                                ", above this server's limit of " +
                                std::to_string(ctx.limits.max_tokens_limit) +
                                " (wick serve --max-tokens-limit)");
  return *v;
}

constexpr size_t kMaxPrompts = 256;

// The log-probabilities one request may ask for: rows x max_tokens x (1 + top_logprobs) entries
// (the engine keeps every row's until it ends, and a non-streamed reply holds them all at once).
// About 60 bytes each as JSON text: at the bound, a chat reply with 20 alternatives is 122 MB and
// the server peaks near 450 MB (measured) while writing it.
constexpr int64_t kMaxLogprobEntries = int64_t{1} << 21;

// Holds a request with logprobs to kMaxLogprobEntries: a max_tokens left to its default shrinks
// to fit (the reply then ends with finish_reason "length" there); one given is a 400 naming it.
void fit_logprob_budget(Job& job, size_t prompts, bool max_given, const char* max_name) {
  if (job.logprobs < 0) return;
  const int64_t rows = static_cast<int64_t>(prompts) * job.n;
  const int64_t per_token = rows * (1 + job.logprobs);
  const int64_t fit = kMaxLogprobEntries / per_token;
  if (job.config.max_tokens <= fit) return;
  if (!max_given && fit >= 1) {
    job.config.max_tokens = static_cast<int>(fit);
    return;
  }
  const std::string alternatives = job.kind == Kind::kChat ? "top_logprobs" : "logprobs";
  throw bad_request(
      fit >= 1 ? max_name : "n",
      "with logprobs, one request may ask for at most " + std::to_string(kMaxLogprobEntries) +
          " log-probabilities, counted as choices (" + (prompts > 1 ? "prompts x 'n'" : "'n'") +
          ") x '" + max_name + "' x (1 + '" + alternatives + "'); this one asks for " +
          std::to_string(rows) + " x " + std::to_string(job.config.max_tokens) + " x " +
          std::to_string(1 + job.logprobs) + " = " +
          std::to_string(per_token * job.config.max_tokens) + ": " +
          (fit >= 1 ? "ask for at most " + std::to_string(fit) + " tokens, or fewer choices or "
                                                                  "alternatives"
                    : std::string("ask for fewer choices or alternatives")));
}

// Rows of one request (prompts x n) must fit the engine's queue at once (all or none).
void check_rows(const ServeContext& ctx, size_t prompts, int n) {
  if (!ctx.engine) return;  // no LM head: run_job answers 404
  const size_t rows = prompts * static_cast<size_t>(n);
  const size_t room = static_cast<size_t>(ctx.engine->options().queue_length);
  if (rows > room)
    throw bad_request("n", "the request needs " + std::to_string(rows) +
                               " rows (prompts x n), more than this server's queue of " +
                               std::to_string(room) + " (wick serve --queue)");
}

// The chat template's message boundaries kept for the prefix cache: the last few (each costs a
// state copy; a conversation re-sent grows by two messages a turn).
constexpr size_t kMaxBoundaries = 8;

void check_prompt_length(const ServeContext& ctx, size_t n, const char* param) {
  if (static_cast<int64_t>(n) > ctx.limits.max_prompt_tokens)
    throw bad_request(param, "the prompt is " + std::to_string(n) +
                                 " tokens, above this server's limit of " +
                                 std::to_string(ctx.limits.max_prompt_tokens) +
                                 " (wick serve --max-prompt-tokens)");
}

std::string message_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad_request(param, "'" + param + "' must be a string or an array of text parts, found " +
                                 json_type(content));
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string pj = param + "[" + std::to_string(j) + "]";
    const Json& part = content[j];
    if (!part.is_object())
      throw bad_request(pj, "'" + pj + "' must be an object {type, text}, found " +
                                json_type(part));
    const std::string type = opt_string(part, "type", pj + ".type").value_or("");
    if (type != "text")
      throw bad_request(pj + ".type", "'" + pj + ".type' must be \"text\" (wick serves a text "
                                      "model), found \"" + type + "\"");
    text += opt_string(part, "text", pj + ".text").value_or("");
  }
  return text;
}

// Token counts at which the encoded prompt ends exactly at the given byte offsets.
std::vector<size_t> token_boundaries(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                     const std::vector<size_t>& byte_ends) {
  std::vector<size_t> out;
  size_t bytes = 0, next = 0;
  for (size_t i = 0; i < ids.size() && next < byte_ends.size(); ++i) {
    bytes += token_text(tok, ids[i]).size();
    while (next < byte_ends.size() && byte_ends[next] < bytes) ++next;
    if (next < byte_ends.size() && byte_ends[next] == bytes) out.push_back(i + 1);
  }
  return out;
}

Job parse_chat(const ServeContext& ctx, const Json& b) {
  Job job;
  job.kind = Kind::kChat;
  refuse_unsupported(b);
  const Json* msgs = field(b, "messages");
  if (!msgs) throw bad_request("messages", "'messages' is required: an array of {role, content}");
  if (!msgs->is_array())
    throw bad_request("messages", "'messages' must be an array of {role, content}, found " +
                                      json_type(*msgs));
  if (msgs->empty()) throw bad_request("messages", "'messages' must hold at least one message");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string pi = "messages[" + std::to_string(i) + "]";
    const Json& m = (*msgs)[i];
    if (!m.is_object())
      throw bad_request(pi, "'" + pi + "' must be an object {role, content}, found " +
                                json_type(m));
    const auto role = opt_string(m, "role", pi + ".role");
    if (!role) throw bad_request(pi + ".role", "'" + pi + ".role' is required");
    if (*role == "tool" || *role == "function")
      throw bad_request(pi + ".role", "'" + pi + ".role' \"" + *role +
                                          "\": wick serve does not do tool calling");
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant")
      throw bad_request(pi + ".role", "'" + pi + ".role' must be system, user or assistant, found \"" +
                                          *role + "\"");
    const Json* content = field(m, "content");
    ChatMessage cm;
    cm.role = *role;
    if (content) {
      cm.content = message_text(*content, pi + ".content");
    } else if (*role != "assistant") {
      throw bad_request(pi + ".content", "'" + pi + ".content' is required");
    }
    messages.push_back(std::move(cm));
  }
  parse_sampling(ctx, b, job);
  check_rows(ctx, 1, job.n);
  job.config.max_tokens = static_cast<int>(std::min<int64_t>(
      INT32_MAX,
      max_tokens_field(ctx, b, field(b, "max_completion_tokens") ? "max_completion_tokens"
                                                                 : "max_tokens",
                       ctx.limits.max_tokens_limit)));
  for (const std::string& s : ctx.chat_template.stop)
    if (std::find(job.config.stop_strings.begin(), job.config.stop_strings.end(), s) ==
        job.config.stop_strings.end())
      job.config.stop_strings.push_back(s);
  const bool lp = opt_bool(b, "logprobs").value_or(false);
  const auto top = opt_int(b, "top_logprobs", 0, 20);
  if (top && !lp)
    throw bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (lp) job.logprobs = static_cast<int>(top.value_or(0));
  const char* max_name =
      field(b, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  fit_logprob_budget(job, 1, field(b, max_name) != nullptr, max_name);

  const RenderedChat chat = ctx.chat_template.render(messages);
  PromptSpec p;
  p.tokens = ctx.tokenizer->encode(chat.prompt);
  if (p.tokens.empty()) throw bad_request("messages", "the messages make an empty prompt");
  check_prompt_length(ctx, p.tokens.size(), "messages");
  p.boundaries = token_boundaries(*ctx.tokenizer, p.tokens, chat.boundaries);
  if (p.boundaries.size() > kMaxBoundaries)
    p.boundaries.erase(p.boundaries.begin(),
                       p.boundaries.end() - static_cast<std::ptrdiff_t>(kMaxBoundaries));
  p.continues = chat.continues;
  job.prompts.push_back(std::move(p));
  return job;
}

Job parse_completion(const ServeContext& ctx, const Json& b) {
  Job job;
  job.kind = Kind::kText;
  refuse_unsupported(b);
  if (field(b, "suffix"))
    throw bad_request("suffix", "'suffix' (insertion) is not supported: an RWKV model continues "
                                "text left to right");
  if (auto bo = opt_int(b, "best_of", 1, 64); bo && *bo != 1)
    throw bad_request("best_of", "'best_of' other than 1 is not supported; use 'n' and choose");
  const Json* pr = field(b, "prompt");
  if (!pr) throw bad_request("prompt", "'prompt' is required: a string, strings or token ids");
  std::vector<PromptSpec> prompts;
  auto add_text = [&](const std::string& text, const std::string& param) {
    PromptSpec p;
    p.tokens = ctx.tokenizer->encode(text);
    if (p.tokens.empty())
      throw bad_request(param, "'" + param + "' is empty: a completion continues at least one "
                                             "token");
    p.echo = text;
    prompts.push_back(std::move(p));
  };
  auto add_ids = [&](std::vector<int32_t> ids, const std::string& param) {
    if (ids.empty()) throw bad_request(param, "'" + param + "' holds no token ids");
    PromptSpec p;
    p.echo = utf8_replace_invalid(ctx.tokenizer->decode(ids));
    p.tokens = std::move(ids);
    prompts.push_back(std::move(p));
  };
  if (pr->is_string()) {
    add_text(pr->get<std::string>(), "prompt");
  } else if (pr->is_array()) {
    if (pr->empty()) throw bad_request("prompt", "'prompt' is an empty array");
    if (!(*pr)[0].is_number() && pr->size() > kMaxPrompts)
      throw bad_request("prompt", "'prompt' holds " + std::to_string(pr->size()) +
                                      " prompts; one request takes at most " +
                                      std::to_string(kMaxPrompts));
    const Json& first = (*pr)[0];
    if (first.is_number()) {
      add_ids(token_ids(*pr, "prompt", "prompt", ctx.tokenizer->vocab_size()), "prompt");
    } else {
      for (size_t i = 0; i < pr->size(); ++i) {
        const Json& e = (*pr)[i];
        const std::string pi = "prompt[" + std::to_string(i) + "]";
        if (first.is_string() && e.is_string()) {
          add_text(e.get<std::string>(), pi);
        } else if (first.is_array() && e.is_array()) {
          add_ids(token_ids(e, pi, pi, ctx.tokenizer->vocab_size()), pi);
        } else {
          throw bad_request("prompt", "'prompt' must be a string, an array of strings, an array "
                                      "of token ids or an array of token-id arrays; element " +
                                          std::to_string(i) + " is " + json_type(e));
        }
      }
    }
  } else {
    throw bad_request("prompt", "'prompt' must be a string, strings or token ids, found " +
                                    json_type(*pr));
  }
  for (const PromptSpec& p : prompts) check_prompt_length(ctx, p.tokens.size(), "prompt");
  parse_sampling(ctx, b, job);
  check_rows(ctx, prompts.size(), job.n);
  job.config.max_tokens =
      static_cast<int>(std::min<int64_t>(INT32_MAX, max_tokens_field(ctx, b, "max_tokens", 16)));
  const bool echo = opt_bool(b, "echo").value_or(false);
  if (auto lp = opt_int(b, "logprobs", 0, 5)) {
    if (echo)
      throw bad_request("echo", "'echo' with 'logprobs' (log-probabilities of the prompt) is not "
                                "supported; send one or the other");
    job.logprobs = static_cast<int>(*lp);
  }
  fit_logprob_budget(job, prompts.size(), field(b, "max_tokens") != nullptr, "max_tokens");
  if (!echo)
    for (PromptSpec& p : prompts) p.echo.clear();
  job.prompts = std::move(prompts);
  return job;
}

// ---- running ------------------------------------------------------------------------------

const char* finish_reason(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens:
    case StopReason::kKvCacheFull:
      return "length";
    default:
      return "stop";
  }
}

struct Choice {
  bool strip_space = false;  // chat: the reply's first space is still to be dropped
  std::vector<TokenLogprob> pending;  // streamed logprobs not yet sent
  size_t text_bytes = 0;              // completion text sent so far (text_offset)
  bool done = false;
  EngineResult result;
};

class Run : public std::enable_shared_from_this<Run> {
 public:
  Run(ServeContext& ctx, std::shared_ptr<Exchange> ex, Job job)
      : ctx_(ctx),
        ex_(std::move(ex)),
        job_(std::move(job)),
        id_(random_id(job_.kind == Kind::kChat ? "chatcmpl-" : "cmpl-")),
        created_(static_cast<int64_t>(std::time(nullptr))),
        endpoint_(job_.kind == Kind::kChat ? "chat_completions" : "completions") {}

  void start() {
    const size_t rows = job_.prompts.size() * static_cast<size_t>(job_.n);
    choices_.resize(rows);
    std::vector<Request> requests;
    requests.reserve(rows);
    auto self = shared_from_this();
    for (size_t i = 0; i < rows; ++i) {
      const PromptSpec& p = job_.prompts[i / static_cast<size_t>(job_.n)];
      choices_[i].strip_space = job_.kind == Kind::kChat &&
                                ctx_.chat_template.strip_reply_space && !p.continues;
      Request r;
      r.prompt_tokens = p.tokens;
      r.config = job_.config;
      r.config.sampling.seed = job_.config.sampling.seed + i;  // as generate_batch
      r.config.logprobs = job_.logprobs;
      r.state_id = job_.state_id;
      r.adapter = job_.adapter;
      r.cache_boundaries = p.boundaries;
      if (job_.stream) {
        r.on_chunk = [self, i](std::string_view text, int32_t) { return self->chunk(i, text); };
        if (job_.logprobs >= 0)
          r.on_logprob = [self, i](const TokenLogprob& lp) {
            self->choices_[i].pending.push_back(lp);
          };
      }
      r.on_done = [self, i](const EngineResult& res) { self->done(i, res); };
      requests.push_back(std::move(r));
    }
    if (job_.stream) {
      HttpReply head;
      head.content_type = "text/event-stream";
      head.headers = cors_;
      if (job_.kind == Kind::kChat) {
        for (size_t i = 0; i < rows; ++i) {
          Json c = chunk_base();
          c["choices"] = Json::array({Json{{"index", i},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}});
          if (job_.include_usage) c["usage"] = nullptr;
          head.body += "data: " + dump_json(c) + "\n\n";
        }
      }
      stream_head_ = std::move(head);
    }
    std::vector<RequestHandle> handles;
    try {
      handles = ctx_.engine->submit_all(std::move(requests));
    } catch (const QueueFullError& e) {
      throw unavailable(std::string("the server is busy: ") + e.what());
    } catch (const EngineStoppedError&) {
      throw unavailable("the server is shutting down");
    } catch (const InputError& e) {
      throw bad_request(job_.kind == Kind::kChat ? "messages" : "prompt", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (remaining_ > 0) handles_ = handles;  // not all done already
    }
    std::weak_ptr<Run> weak = self;
    ex_->on_disconnect([weak] {
      if (auto run = weak.lock()) run->cancel_all();
    });
  }

  void set_cors(std::vector<std::pair<std::string, std::string>> h) { cors_ = std::move(h); }
  // The stream is started by the handler after start() succeeded (an error before is a plain
  // reply); chunks queued meanwhile wait in `early_`.
  void open_stream() {
    // One locked block: the engine thread's emit() cannot overtake the early events.
    std::lock_guard<std::mutex> lock(mutex_);
    ex_->start_stream(std::move(stream_head_), ": ping\n\n");
    opened_ = true;
    for (auto& e : early_)
      if (!ex_->send(std::move(e))) client_lost_ = true;
    early_.clear();
    if (ended_pending_) end_stream_locked();
  }

 private:
  Json chunk_base() const {
    return Json{{"id", id_},
                {"object", job_.kind == Kind::kChat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", ctx_.served_id}};
  }

  // Log-probabilities are written as JSON text, never as a JSON tree: a tree costs ~1 KiB per
  // entry, and a non-streamed reply may hold 2^21 of them (kMaxLogprobEntries).
  void append_chat_entry(std::string& out, int32_t id, float lp) const {
    const std::string raw = token_text(*ctx_.tokenizer, id);
    out += "{\"token\":";
    out += dump_json(Json(utf8_replace_invalid(raw)));
    out += ",\"logprob\":";
    out += Json(lp).dump();
    out += ",\"bytes\":[";
    for (size_t k = 0; k < raw.size(); ++k) {
      if (k) out += ',';
      out += std::to_string(static_cast<int>(static_cast<unsigned char>(raw[k])));
    }
    out += ']';
  }

  // {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}
  std::string chat_logprobs(std::span<const TokenLogprob> lps) const {
    std::string out = "{\"content\":[";
    for (size_t i = 0; i < lps.size(); ++i) {
      if (i) out += ',';
      append_chat_entry(out, lps[i].token, lps[i].logprob);
      out += ",\"top_logprobs\":[";
      for (size_t k = 0; k < lps[i].top.size(); ++k) {
        if (k) out += ',';
        append_chat_entry(out, lps[i].top[k].first, lps[i].top[k].second);
        out += '}';
      }
      out += "]}";
    }
    out += "]}";
    return out;
  }

  // {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}
  std::string text_logprobs(std::span<const TokenLogprob> lps, size_t offset) const {
    std::string tokens = "[", lp = "[", top = "[", off = "[";
    for (size_t i = 0; i < lps.size(); ++i) {
      if (i) {
        tokens += ',';
        lp += ',';
        top += ',';
        off += ',';
      }
      const std::string raw = token_text(*ctx_.tokenizer, lps[i].token);
      tokens += dump_json(Json(utf8_replace_invalid(raw)));
      lp += Json(lps[i].logprob).dump();
      Json alt = Json::object();  // at most 5 alternatives
      for (const auto& [id, l] : lps[i].top)
        alt[utf8_replace_invalid(token_text(*ctx_.tokenizer, id))] = l;
      top += dump_json(alt);
      off += std::to_string(offset);
      offset += raw.size();
    }
    tokens += "],\"token_logprobs\":";
    tokens += lp;
    tokens += "],\"top_logprobs\":";
    tokens += top;
    tokens += "],\"text_offset\":";
    tokens += off;
    tokens += "]}";
    return "{\"tokens\":" + tokens;
  }

  std::string logprobs_json(std::span<const TokenLogprob> lps, size_t text_offset) const {
    if (job_.logprobs < 0) return "null";
    return job_.kind == Kind::kChat ? chat_logprobs(lps) : text_logprobs(lps, text_offset);
  }

  // Logprob entries of a finished row: every generated token but a stop token.
  static std::span<const TokenLogprob> kept_logprobs(const EngineResult& r) {
    std::span<const TokenLogprob> out = r.logprobs;
    if (r.stop_reason == StopReason::kStopToken && !out.empty()) out = out.first(out.size() - 1);
    return out;
  }

  // `object` (dumped JSON text of an object) with the member "key": raw_json added.
  static void add_member(std::string& object, std::string_view key, std::string_view raw_json) {
    object.pop_back();  // '}'
    if (object.size() > 1) object += ',';
    object += '"';
    object += key;
    object += "\":";
    object += raw_json;
    object += '}';
  }

  // A chunk: chunk_base() (+ usage etc. in `ch`) with one choice, `choice` plus its logprobs.
  std::string chunk_event(const Json& ch, const Json& choice, const std::string& logprobs) const {
    std::string c = dump_json(choice);
    add_member(c, "logprobs", logprobs);
    std::string out = dump_json(ch);
    add_member(out, "choices", "[" + c + "]");
    return "data: " + out + "\n\n";
  }

  void emit(std::string event) {
    // Engine thread. Before the stream is open, keep the event (bounded by the first pass).
    std::lock_guard<std::mutex> lock(mutex_);
    if (!opened_) {
      early_.push_back(std::move(event));
      return;
    }
    if (!ex_->send(std::move(event))) client_lost_ = true;
  }

  bool chunk(size_t i, std::string_view text_in) {
    Choice& c = choices_[i];
    std::string text(text_in);
    if (c.strip_space && !text.empty()) {
      if (text[0] == ' ') text.erase(0, 1);
      c.strip_space = false;
    }
    if (text.empty() && c.pending.empty()) return !lost();
    Json ch = chunk_base();
    Json choice;
    std::string logprobs;
    if (job_.kind == Kind::kChat) {
      choice = {{"index", i}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}};
      logprobs = logprobs_json(c.pending, 0);
    } else {
      const PromptSpec& p = job_.prompts[i / static_cast<size_t>(job_.n)];
      if (c.text_bytes == 0 && !p.echo.empty()) {
        text = p.echo + text;
      }
      choice = {{"text", text}, {"index", i}, {"finish_reason", nullptr}};
      logprobs = logprobs_json(c.pending, c.text_bytes);
      c.text_bytes += text.size();
    }
    c.pending.clear();
    if (job_.include_usage) ch["usage"] = nullptr;
    emit(chunk_event(ch, choice, logprobs));
    return !lost();
  }

  bool lost() {
    std::lock_guard<std::mutex> lock(mutex_);
    return client_lost_;
  }

  void cancel_all() {
    std::vector<RequestHandle> hs;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      client_lost_ = true;
      hs = handles_;
    }
    for (auto& h : hs) h.cancel();
  }

  Json usage() const {
    int64_t prompt = 0, completion = 0, cached = 0;
    for (size_t i = 0; i < choices_.size(); ++i) {
      const EngineResult& r = choices_[i].result;
      completion += r.generated_tokens;
      if (i % static_cast<size_t>(job_.n) == 0) {
        prompt += r.prompt_tokens;
        cached += r.cached_tokens;
      }
    }
    Json u = {{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion}};
    u["prompt_tokens_details"] = {{"cached_tokens", cached}};
    if (job_.config.speculative.enabled()) {
      int64_t drafted = 0, accepted = 0, passes = 0;
      for (const Choice& c : choices_) {
        drafted += c.result.speculative.drafted;
        accepted += c.result.speculative.accepted;
        passes += c.result.speculative.passes;
      }
      u["speculative"] = {{"drafted", drafted}, {"accepted", accepted}, {"passes", passes}};
    }
    return u;
  }

  Json timings() const {
    int64_t prompt_n = 0, cache_n = 0, predicted_n = 0;
    double prompt_ms = 0, predicted_ms = 0, ttft = 0, queue = 0;
    CacheTier tier = CacheTier::kNone;
    for (const Choice& c : choices_) {
      const EngineResult& r = c.result;
      prompt_n += r.prompt_tokens - r.cached_tokens;
      cache_n += r.cached_tokens;
      predicted_n += r.generated_tokens;
      prompt_ms = std::max(prompt_ms, r.timings.prefill_ms);
      predicted_ms = std::max(predicted_ms, r.timings.decode_ms);
      ttft = std::max(ttft, r.ttft_ms);
      queue = std::max(queue, r.queue_ms);
      if (r.cache_tier == CacheTier::kSecond ||
          (r.cache_tier == CacheTier::kLocal && tier == CacheTier::kNone))
        tier = r.cache_tier;
    }
    auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
    auto per_second = [](double ms, int64_t n) {
      return ms > 0 ? static_cast<double>(n) * 1000.0 / ms : 0.0;
    };
    return Json{{"prompt_n", prompt_n},
                {"cache_n", cache_n},
                {"prompt_ms", prompt_ms},
                {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
                {"prompt_per_second", per_second(prompt_ms, prompt_n)},
                {"predicted_n", predicted_n},
                {"predicted_ms", predicted_ms},
                {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
                {"predicted_per_second", per_second(predicted_ms, predicted_n)},
                {"ttft_ms", ttft},
                {"queue_ms", queue},
                {"cache_tier", std::string(cache_tier_name(tier))}};
  }

  // An ended row that is not a normal completion, as an API error; null for a normal one.
  std::optional<ApiError> row_error(const EngineResult& r) const {
    if (r.stop_reason == StopReason::kError) {
      bool input = false;
      try {
        if (r.exception) std::rethrow_exception(r.exception);
      } catch (const InputError&) {
        input = true;
      } catch (...) {
      }
      if (input) return bad_request("", r.error);
      return ApiError(500, "server_error", "generation failed: " + r.error);
    }
    if (r.stop_reason == StopReason::kCancelled || r.stop_reason == StopReason::kDeadline)
      return unavailable("the request was cancelled: the server is shutting down");
    return std::nullopt;
  }

  void done(size_t i, const EngineResult& res) {
    Choice& c = choices_[i];
    // Everything but the final state (megabytes; the server does not return it).
    static_cast<GenerationResult&>(c.result) = res;
    c.result.cached_tokens = res.cached_tokens;
    c.result.cache_tier = res.cache_tier;
    c.result.error = res.error;
    c.result.exception = res.exception;
    c.result.queue_ms = res.queue_ms;
    c.result.ttft_ms = res.ttft_ms;
    c.result.total_ms = res.total_ms;
    c.done = true;
    ctx_.metrics.generation(res);
    int left;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      left = --remaining_;
    }
    if (job_.stream) {
      const std::optional<ApiError> err = row_error(res);
      if (!err) {
        Json ch = chunk_base();
        std::vector<TokenLogprob> rest = c.pending;
        if (res.stop_reason == StopReason::kStopToken && !rest.empty()) rest.pop_back();
        Json choice;
        std::string logprobs = "null";
        if (job_.kind == Kind::kChat) {
          choice = {{"index", i},
                    {"delta", Json::object()},
                    {"finish_reason", finish_reason(res.stop_reason)}};
          if (!rest.empty()) logprobs = logprobs_json(rest, 0);
        } else {
          const PromptSpec& p = job_.prompts[i / static_cast<size_t>(job_.n)];
          const std::string echo = c.text_bytes == 0 ? p.echo : std::string();
          choice = {{"text", echo}, {"index", i}, {"finish_reason", finish_reason(res.stop_reason)}};
          if (!rest.empty()) logprobs = logprobs_json(rest, c.text_bytes + echo.size());
        }
        if (job_.include_usage) ch["usage"] = nullptr;
        if (left == 0 && !job_.include_usage) ch["timings"] = timings();
        emit(chunk_event(ch, choice, logprobs));
      } else if (!stream_error_) {
        stream_error_ = true;
        Json e = Json::parse(error_body(*err));
        emit("data: " + dump_json(e) + "\n\n");
      }
    }
    if (left == 0) finish();
  }

  void finish() {
    const int status = [&] {
      for (const Choice& c : choices_)
        if (auto e = row_error(c.result)) return e->status();
      return 200;
    }();
    if (job_.stream) {
      if (job_.include_usage && !stream_error_) {
        Json ch = chunk_base();
        ch["choices"] = Json::array();
        ch["usage"] = usage();
        ch["timings"] = timings();
        emit("data: " + dump_json(ch) + "\n\n");
      }
      emit("data: [DONE]\n\n");
      std::lock_guard<std::mutex> lock(mutex_);
      if (opened_) {
        end_stream_locked();
      } else {
        ended_pending_ = true;
      }
      ctx_.metrics.request(endpoint_, client_lost_ ? 499 : 200);
    } else {
      if (ex_->gone()) {  // the client left: nothing to answer
        ctx_.metrics.request(endpoint_, 499);
        release();
        return;
      }
      for (const Choice& c : choices_)
        if (auto e = row_error(c.result)) {
          HttpReply r = error_reply(*e);
          r.headers.insert(r.headers.end(), cors_.begin(), cors_.end());
          ex_->reply(std::move(r));
          ctx_.metrics.request(endpoint_, e->status());
          release();
          return;
        }
      // Written into one string: the log-probabilities may be most of a large body.
      Json head = {{"id", id_},
                   {"object", job_.kind == Kind::kChat ? "chat.completion" : "text_completion"},
                   {"created", created_},
                   {"model", ctx_.served_id},
                   {"usage", usage()},
                   {"timings", timings()}};
      std::string body = dump_json(head);
      add_member(body, "choices", "[");  // the choices go in before the closing "]}"
      body.pop_back();
      for (size_t i = 0; i < choices_.size(); ++i) {
        const EngineResult& r = choices_[i].result;
        const PromptSpec& p = job_.prompts[i / static_cast<size_t>(job_.n)];
        Json choice;
        if (job_.kind == Kind::kChat) {
          std::string text = r.text;
          if (choices_[i].strip_space && !text.empty() && text[0] == ' ') text.erase(0, 1);
          choice = {{"index", i},
                    {"message", {{"role", "assistant"}, {"content", text}}},
                    {"finish_reason", finish_reason(r.stop_reason)}};
        } else {
          choice = {{"text", p.echo + r.text},
                    {"index", i},
                    {"finish_reason", finish_reason(r.stop_reason)}};
        }
        std::string c = dump_json(choice);
        add_member(c, "logprobs", logprobs_json(kept_logprobs(r), p.echo.size()));
        if (i) body += ',';
        body += c;
      }
      body += "]}";
      HttpReply r;
      r.body = std::move(body);
      r.headers = cors_;
      ex_->reply(std::move(r));
      ctx_.metrics.request(endpoint_, status);
    }
    release();
  }

  // A stream that lost events (its client stopped reading) is dropped, not ended: a truncated
  // stream must not look complete.
  void end_stream_locked() {
    if (client_lost_) {
      ex_->abort();
    } else {
      ex_->end();
    }
  }

  // Drops the handles: they keep the requests (whose callbacks keep this Run) alive.
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    handles_.clear();
  }

  ServeContext& ctx_;
  const std::shared_ptr<Exchange> ex_;
  const Job job_;
  const std::string id_;
  const int64_t created_;
  const std::string endpoint_;
  std::vector<std::pair<std::string, std::string>> cors_;
  std::vector<Choice> choices_;  // engine thread (and the handler before submit)
  HttpReply stream_head_;
  std::mutex mutex_;  // handles_, remaining_, opened_, early_, client_lost_, ended_pending_
  std::vector<RequestHandle> handles_;
  int remaining_ = 0;
  bool opened_ = false, client_lost_ = false, ended_pending_ = false;
  bool stream_error_ = false;  // engine thread
  std::vector<std::string> early_;

 public:
  void set_remaining(int n) { remaining_ = n; }
};

void run_job(ServeContext& ctx, const HttpRequest& req, const std::shared_ptr<Exchange>& ex,
             Job job, std::vector<std::pair<std::string, std::string>> cors) {
  if (!ctx.engine)
    throw not_found("model", "this server's model has no language-model head (an embedding "
                             "model): use /v1/embeddings");
  (void)req;
  const bool stream = job.stream;
  const int rows = static_cast<int>(job.prompts.size()) * job.n;
  auto run = std::make_shared<Run>(ctx, ex, std::move(job));
  run->set_cors(std::move(cors));
  run->set_remaining(rows);
  run->start();  // throws ApiError before anything is sent
  if (stream) run->open_stream();
}


}  // namespace

void handle_chat_completions(ServeContext& ctx, const HttpRequest& req,
                             const std::shared_ptr<Exchange>& ex) {
  const Json body = parse_body(req.body);
  run_job(ctx, req, ex, parse_chat(ctx, body), cors_headers(ctx));
}

void handle_completions(ServeContext& ctx, const HttpRequest& req,
                        const std::shared_ptr<Exchange>& ex) {
  const Json body = parse_body(req.body);
  run_job(ctx, req, ex, parse_completion(ctx, body), cors_headers(ctx));
}

}  // namespace wick::server
