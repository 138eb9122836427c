// wick serve --model M [--host 127.0.0.1] [--port 8080] [--api-key K] ...
// An OpenAI-compatible HTTP server on the serving engine (README "wick serve", serving.md §3).
// Listens at once (GET /health answers 503 while the model loads) and prints "wick serve:
// listening on http://HOST:PORT" on stdout when ready (GET /health is then 200). SIGTERM /
// SIGINT while the model loads: exit 0 at once. Afterwards: /health turns 503 and new requests
// are refused, running requests finish within --shutdown-grace-s or are cancelled, then the
// process exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

#include "commands.h"
#include "common.h"
#include "replicas/redis_tier.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/serve_context.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/lora.h"
#include "wick/state_file.h"
#include "wick/tuned_state.h"

namespace wick::cli {
namespace {

// `--adapter NAME=FILE[:ALPHA]`: the text after the last ':' is ALPHA when it is a number, else
// part of FILE (the file must then store its alpha).
server::ServedAdapter load_served_adapter(const std::string& spec, const Model& model) {
  const size_t eq = spec.find('=');
  if (eq == 0 || eq == std::string::npos || eq + 1 == spec.size())
    throw InputError(
        "--adapter: expected NAME=FILE:ALPHA (ALPHA: the adapter's training alpha), "
        "found '" +
        spec + "'");
  server::ServedAdapter a;
  a.id = spec.substr(0, eq);
  std::string path = spec.substr(eq + 1);
  LoraOptions lo;
  if (const size_t colon = path.rfind(':'); colon != std::string::npos) {
    const std::string tail = path.substr(colon + 1);
    char* end = nullptr;
    const double alpha = std::strtod(tail.c_str(), &end);
    if (!tail.empty() && end && *end == '\0') {
      lo.alpha = alpha;
      path = path.substr(0, colon);
    }
  }
  try {
    a.adapter = LoraAdapter::load(path, model, lo);
  } catch (const InputError& e) {
    throw InputError("--adapter " + a.id + ": " + e.what() +
                     (lo.alpha ? "" : " (give it as --adapter NAME=FILE:ALPHA)"));
  }
  a.source = std::filesystem::path(path).filename().string();
  return a;
}

struct ServeOptions {
  std::string model, tokenizer, host = "127.0.0.1", api_key, head, served_name, cors_origin;
  std::string chat_template;
  int port = 8080;
  int max_connections = 4096;
  LoadOptions load;
  AttentionFlags attention;
  int threads = 0;
  int max_rows = 16, prefill_chunk = 256, queue = 256;
  int64_t cache_mib = 1024;
  std::vector<std::string> states;    // NAME=FILE
  std::vector<std::string> adapters;  // NAME=FILE[:ALPHA]
  size_t max_body_bytes = 8388608;
  int64_t max_prompt_tokens = 65536, max_tokens_limit = 65536;
  double read_timeout_s = 30, idle_timeout_s = 60, shutdown_grace_s = 10;
  // Replicas (README "Scaling out").
  std::string redis, redis_prefix = "wick", replica_name;
  int redis_ttl_s = 0, redis_timeout_ms = 250;
};

// --replica-name's default: this machine's host name and the port.
std::string default_replica_name(int port) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "wick");
  return std::string(host) + ":" + std::to_string(port);
}

std::string default_served_name(const Model& model, const std::string& path) {
  if (!path.empty()) {
    std::filesystem::path p(path);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
    const std::string stem = p.stem().string();
    if (!stem.empty()) return stem;
  }
  std::string s = model.info().source;  // "<embedded default model NAME.safetensors>"
  const size_t sp = s.rfind(' ');
  if (sp != std::string::npos) s = s.substr(sp + 1);
  if (!s.empty() && s.back() == '>') s.pop_back();
  return std::filesystem::path(s).stem().string();
}

void load_head(server::ServeContext& ctx, const Model& model, const ServeOptions& o) {
  if (model.info().embedding_rwkv) {
    ctx.embedder.emplace(Embedder::embedding_rwkv(model, ctx.tokenizer, o.model));
  }
  if (o.head.empty()) return;
  std::string rerank_error;
  try {
    ctx.reranker.emplace(Reranker::load(model, ctx.tokenizer, o.head));
    return;
  } catch (const Error& e) {
    rerank_error = e.what();
  }
  if (model.info().embedding_rwkv)
    throw InputError("--head " + o.head + ": not a reranker head for this model (" + rerank_error +
                     ")");
  try {
    ctx.embedder.emplace(Embedder::with_head(model, ctx.tokenizer, o.head));
  } catch (const Error& e) {
    throw InputError("--head " + o.head + ": neither a reranker head (" + rerank_error +
                     ") nor an embedding head (" + e.what() + ")");
  }
}

std::chrono::milliseconds seconds(double s, const char* flag) {
  if (!(s > 0) || s > 86400) throw InputError(std::string(flag) + " must be in (0, 86400] seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// Raises the soft limit on open descriptors to the hard one (idle HTTP connections hold one
// each). Returns a line for the log, empty when nothing changed.
std::string raise_descriptor_limit() {
  rlimit fds{};
  if (::getrlimit(RLIMIT_NOFILE, &fds) != 0 || fds.rlim_cur == fds.rlim_max) return {};
  const rlim_t before = fds.rlim_cur;
  fds.rlim_cur = fds.rlim_max;
  if (fds.rlim_max == RLIM_INFINITY) {
    // Linux takes at most fs.nr_open for RLIMIT_NOFILE.
    rlim_t nr_open = 1048576;
    std::ifstream f("/proc/sys/fs/nr_open");
    if (unsigned long long v = 0; f >> v) nr_open = static_cast<rlim_t>(v);
    fds.rlim_cur = nr_open;
  }
  if (fds.rlim_cur <= before || ::setrlimit(RLIMIT_NOFILE, &fds) != 0)
    return "open-descriptor limit stays at " + std::to_string(before) +
           " (raising it to the hard limit failed)";
  return "open-descriptor limit raised from " + std::to_string(before) + " to " +
         std::to_string(fds.rlim_cur);
}

// SIGTERM / SIGINT, taken on a thread of their own from start-up: during the model load the
// process exits at once (status 0: nothing was being served); afterwards the signal is handed
// to the main thread, which drains.
class StopSignals {
 public:
  StopSignals() {
    // Block them before any other thread starts, so every thread inherits the mask.
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    auto state = state_;
    const sigset_t set = set_;
    // Detached: if start-up fails, the process exits with the thread still waiting.
    std::thread([state, set] {
      int sig = 0;
      sigwait(&set, &sig);
      const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
      if (!state->serving.load()) {
        std::fprintf(stderr, "wick serve: %s while loading the model: exiting\n", name);
        std::fflush(stderr);
        std::_Exit(0);
      }
      state->signal.set_value(sig);
    }).detach();
  }
  // The model is loaded: a signal from now on drains instead of exiting.
  void serving() { state_->serving.store(true); }
  // Blocks until SIGTERM or SIGINT; returns it.
  int wait() { return state_->signal.get_future().get(); }

 private:
  struct State {
    std::atomic<bool> serving{false};
    std::promise<int> signal;
  };
  sigset_t set_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

void run_serve(const ServeOptions& o) {
  StopSignals stop_signals;
  ::signal(SIGPIPE, SIG_IGN);
  const std::string descriptors = raise_descriptor_limit();

  if (o.port < 0 || o.port > 65535) throw InputError("--port must be in 0..65535");
  if (o.max_rows < 1) throw InputError("--max-rows must be >= 1");
  if (o.prefill_chunk < 1) throw InputError("--prefill-chunk must be >= 1");
  if (o.queue < 1) throw InputError("--queue must be >= 1");
  if (o.cache_mib < 0) throw InputError("--cache-mib must be >= 0");
  if (o.max_prompt_tokens < 1) throw InputError("--max-prompt-tokens must be >= 1");
  if (o.max_tokens_limit < 1) throw InputError("--max-tokens-limit must be >= 1");
  if (o.max_body_bytes < 1024) throw InputError("--max-body-bytes must be >= 1024");
  if (o.max_connections < 1) throw InputError("--max-connections must be >= 1");
  if (o.threads > 0) set_cli_threads(o.threads);
  if (o.redis_ttl_s < 0) throw InputError("--redis-ttl must be >= 0 seconds (0: no expiry)");
  if (o.redis_timeout_ms < 1 || o.redis_timeout_ms > 60000)
    throw InputError("--redis-timeout-ms must be in 1..60000");
  const replicas::RedisAddress redis_address =
      o.redis.empty() ? replicas::RedisAddress{} : replicas::parse_redis_url(o.redis);

  // Listen first: while the model loads, /health answers 503 {"status":"loading"} (and every
  // other route 503), so an orchestrator can tell "starting" from "down".
  server::HttpServerOptions ho;
  ho.host = o.host;
  ho.port = static_cast<uint16_t>(o.port);
  ho.max_body_bytes = o.max_body_bytes;
  ho.read_timeout = seconds(o.read_timeout_s, "--read-timeout-s");
  ho.idle_timeout = seconds(o.idle_timeout_s, "--idle-timeout-s");
  ho.max_connections = o.max_connections;
  const auto grace = seconds(o.shutdown_grace_s, "--shutdown-grace-s");

  std::atomic<server::Api*> live{nullptr};
  server::HttpServer http(ho,
                          [&live](server::HttpRequest&& req, std::shared_ptr<server::Exchange> ex) {
                            if (server::Api* api = live.load())
                              return api->handle(std::move(req), ex);
                            server::answer_loading(req, ex);
                          });
  http.add_response_header("X-Wick-Replica", o.replica_name.empty()
                                                 ? default_replica_name(http.port())
                                                 : o.replica_name);
  http.start();
  std::cerr << "wick serve: " << (descriptors.empty() ? "" : descriptors + "; ") << "up to "
            << http.max_connections() << " connections"
            << (http.max_connections() < o.max_connections
                    ? " (--max-connections " + std::to_string(o.max_connections) +
                          " within the descriptor limit less " +
                          std::to_string(server::kDescriptorMargin) + ")"
                    : std::string())
            << "\n";
  std::cerr << "wick serve: loading " << (o.model.empty() ? "the embedded model" : o.model) << "\n";

  server::ServeContext ctx;
  Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  ctx.tokenizer = std::shared_ptr<const Tokenizer>(tokenizer_for(model, o.tokenizer));
  ctx.fingerprint = model.info().fingerprint;
  ctx.served_id = o.served_name.empty() ? default_served_name(model, o.model) : o.served_name;
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.stop_tokens = default_stop_tokens(model.geometry().vocab);
  ctx.limits.max_prompt_tokens = o.max_prompt_tokens;
  ctx.limits.max_tokens_limit = o.max_tokens_limit;
  ctx.api_key = o.api_key;
  if (ctx.api_key.empty())
    if (const char* k = std::getenv("WICK_API_KEY")) ctx.api_key = k;
  ctx.cors_origin = o.cors_origin;
  if (!o.chat_template.empty()) ctx.chat_template = server::ChatTemplate::load(o.chat_template);
  load_head(ctx, model, o);

  std::unique_ptr<Engine> engine;
  std::shared_ptr<replicas::RedisTier> redis_tier;
  if (model.has_lm_head()) {
    EngineOptions eo;
    eo.max_rows = o.max_rows;
    eo.prefill_chunk = o.prefill_chunk;
    eo.prefill_chunk_idle = std::max(1024, o.prefill_chunk);
    eo.queue_length = o.queue;
    eo.cache_bytes = static_cast<size_t>(o.cache_mib) << 20;
    if (!o.redis.empty()) {
      replicas::RedisTierOptions ro;
      ro.address = redis_address;
      ro.prefix = o.redis_prefix;
      ro.ttl_s = o.redis_ttl_s;
      ro.read_timeout = std::chrono::milliseconds(o.redis_timeout_ms);
      ro.log = [](const std::string& line) { std::cerr << "wick serve: " << line << "\n"; };
      redis_tier = std::make_shared<replicas::RedisTier>(model, ro);
      eo.second_tier = redis_tier;
      std::cerr << "wick serve: prefix states shared through Redis at " << redis_address.display()
                << " (keys " << o.redis_prefix << ":" << model.info().fingerprint << ":pfx:*"
                << (o.redis_ttl_s ? ", TTL " + std::to_string(o.redis_ttl_s) + " s" : "") << ")\n";
    }
    engine = std::make_unique<Engine>(model, *ctx.tokenizer, eo);
    for (const std::string& spec : o.states) {
      const size_t eq = spec.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == spec.size())
        throw InputError("--state: expected NAME=FILE, found '" + spec + "'");
      const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
      LoadedState loaded = load_any_state(path, model);
      for (const auto& w : loaded.warnings)
        std::cerr << "wick serve: " << path << ": " << w << "\n";
      engine->register_state(name, std::move(loaded.state));
      ctx.state_sources[name] = std::filesystem::path(path).filename().string();
    }
    for (const std::string& spec : o.adapters) {
      server::ServedAdapter a = load_served_adapter(spec, model);
      for (const auto& b : ctx.adapters)
        if (b.id == a.id)
          throw InputError("--adapter: the name '" + a.id + "' is given twice; names must differ");
      std::cerr << "wick serve: adapter " << a.id << ": " << a.adapter->describe() << "\n";
      ctx.adapters.push_back(std::move(a));
    }
    ctx.engine = engine.get();
  } else {
    if (!o.states.empty()) throw InputError("--state: the model has no LM head to generate with");
    if (!o.adapters.empty())
      throw InputError("--adapter: the model has no LM head to generate with");
    if (!ctx.embedder)
      throw InputError(
          "the model has no LM head and no embedding head: nothing to serve (give "
          "--head FILE, or serve a language model)");
  }

  server::Api api(ctx);
  live.store(&api);
  stop_signals.serving();
  std::cerr << "wick serve: " << ctx.served_id << " (" << model.geometry().n_layer
            << " layers, C=" << model.geometry().n_embd << ", V=" << model.geometry().vocab << ")"
            << (ctx.api_key.empty() ? "" : ", API key required")
            << (engine ? "" : ", embeddings only") << "\n";
  std::cout << "wick serve: listening on http://" << o.host << ":" << http.port() << std::endl;

  const int sig = stop_signals.wait();
  std::cerr << "wick serve: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ": draining (up to "
            << o.shutdown_grace_s << " s)\n";
  ctx.draining.store(true);
  if (engine) engine->shutdown(grace);
  // The last turns' states reach Redis before the process ends (another replica continues them).
  if (redis_tier && !redis_tier->flush(std::chrono::seconds(2)))
    std::cerr << "wick serve: some states were not written to Redis before exit\n";
  // Let the last bytes of the finished responses reach their clients.
  const auto flush_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (http.pending_responses() > 0 && std::chrono::steady_clock::now() < flush_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http.stop();
  std::cerr << "wick serve: stopped\n";
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server (chat, completions, embeddings, rerank) with "
      "continuous batching");
  cmd->add_option(
      "-m,--model", o->model,
      "Checkpoint (.pth, .safetensors, HF folder, .rwkvq); default: the embedded model");
  cmd->add_option("--tokenizer", o->tokenizer, "Tokenizer file (default: the model's vocabulary)");
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (default 8080; 0: any free port, printed at start)");
  cmd->add_option(
      "--api-key", o->api_key,
      "Require 'Authorization: Bearer KEY' (also from WICK_API_KEY); /health needs none");
  cmd->add_option("--threads", o->threads,
                  "Kernel threads (default: WICK_THREADS or one per core)");
  add_load_options(cmd, o->load);
  add_attention_flags(cmd, &o->attention);
  cmd->add_option("--max-rows", o->max_rows, "Requests decoding at once (default 16)");
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "Prompt tokens per iteration while others decode (default 256)");
  cmd->add_option("--queue", o->queue, "Requests waiting for a row before 503 (default 256)");
  cmd->add_option("--cache-mib", o->cache_mib, "Prefix state cache in MiB (default 1024; 0: off)");
  cmd->add_option("--state", o->states,
                  "NAME=FILE: a wick state file or a state-tuning file (RWKV-PEFT time_state) "
                  "offered as initial state NAME (repeatable)");
  cmd->add_option("--adapter", o->adapters,
                  "NAME=FILE:ALPHA: a LoRA adapter (RWKV-PEFT or rwkv-metal, .pth/.safetensors; "
                  "ALPHA its training alpha, optional for a file that stores it) that requests "
                  "choose with \"lora\": [{\"id\": NAME, \"scale\": s}] (repeatable; "
                  "GET /v1/adapters lists them)");
  cmd->add_option("--head", o->head,
                  "Reranker or embedding head file (/v1/rerank, /v1/embeddings)");
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body (default 8388608)");
  cmd->add_option("--max-prompt-tokens", o->max_prompt_tokens,
                  "Longest prompt in tokens (default 65536)");
  cmd->add_option("--max-tokens-limit", o->max_tokens_limit,
                  "Largest max_tokens a request may ask (default 65536; the chat default)");
  cmd->add_option("--served-name", o->served_name,
                  "Model id in responses (default: the checkpoint's file stem)");
  cmd->add_option("--read-timeout-s", o->read_timeout_s,
                  "Seconds to receive a whole request from its first byte (default 30)");
  cmd->add_option(
      "--idle-timeout-s", o->idle_timeout_s,
      "Seconds a kept-alive connection may stay silent, or a response unread (default 60)");
  cmd->add_option("--shutdown-grace-s", o->shutdown_grace_s,
                  "Seconds running requests get to finish on SIGTERM (default 10)");
  cmd->add_option("--max-connections", o->max_connections,
                  "Open connections held at once, within the descriptor limit less 64 (default "
                  "4096)");
  cmd->add_option("--cors-origin", o->cors_origin,
                  "Allow this browser origin (CORS headers); default: none");
  cmd->add_option("--chat-template", o->chat_template,
                  "JSON chat template (roles, record, sep, prefix, stop); default: RWKV World");
  cmd->add_option("--redis", o->redis,
                  "redis://[:PASSWORD@]HOST:PORT[/DB]: share prefix states with other replicas "
                  "through Redis (a second cache tier; no TLS: loopback or a private network)");
  cmd->add_option("--redis-prefix", o->redis_prefix, "Key prefix in Redis (default wick)");
  cmd->add_option("--redis-ttl", o->redis_ttl_s,
                  "Seconds a state stays in Redis (default 0: until Redis evicts it; give Redis "
                  "maxmemory + allkeys-lru)");
  cmd->add_option("--redis-timeout-ms", o->redis_timeout_ms,
                  "Longest wait for a Redis lookup before recomputing (default 250)");
  cmd->add_option("--replica-name", o->replica_name,
                  "This replica's name in the X-Wick-Replica response header (default HOST:PORT)");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace wick::cli
