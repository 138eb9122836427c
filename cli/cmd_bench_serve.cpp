// wick bench serve --model M [--clients 1,4,16] [--prompt-tokens 256] [--gen 128] [--json]
//                  [--long-prompt 4096] [--streams 8] [--max-rows N] [--prefill-chunk N] [--reps R]
// The serving engine in process (no HTTP): C clients submit at once (distinct prompts, greedy,
// --gen tokens each, the prefix cache off so every token is computed); reported per client count:
// aggregate generated tokens/s, time to first token p50/p99, inter-token latency p50/p99, and the
// engine's overhead over the batched passes it ran ((wall - time in Model::forward_batch) / time
// in forward_batch). Then the mixed test: --streams streams decoding, alone and with one
// --long-prompt-token prompt arriving while they decode; the streams' inter-token p99 in both.
// Every figure is the median over --reps repetitions, the variants interleaved in each one.
// Last, the prefix cache's hit rate on a scripted --chat-turns chat in the World format whose
// client re-sends the whole history as text each turn (as OpenAI clients do): prompt tokens
// served from the cache / prompt tokens sent.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/stats.h"
#include "bench/timer.h"
#include "commands.h"
#include "common.h"
#include "wick/chat.h"
#include "wick/engine.h"
#include "wick/errors.h"

namespace wick::cli {
namespace {

struct BenchServeOptions {
  AttentionFlags attention;
  LoadOptions load;
  std::string model, tokenizer;
  std::vector<int> clients = {1, 4, 16};
  int prompt_tokens = 256;
  int gen = 128;
  int long_prompt = 4096;
  int streams = 8;
  int max_rows = 0;       // 0: the largest client count (and at least streams + 1)
  int prefill_chunk = 0;  // 0: the engine's default
  int reps = 3;
  int threads = 0;
  int chat_turns = 10;
  int chat_gen = 48;
  bool json = false;
};

using bench::median;
using bench::quantile;  // nearest rank

// Prompt c of n tokens: ids spread over the vocabulary, distinct for every client.
std::vector<int32_t> make_prompt(int vocab, int n, int c) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(c + 1);
  for (auto& t : p) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    t = static_cast<int32_t>(1 +
                             (x * 0x2545F4914F6CDD1Dull >> 33) % static_cast<uint64_t>(vocab - 1));
  }
  return p;
}

struct RunStats {
  double tokens_per_s = 0, ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0, overhead_pct = 0;
};

// Gaps between consecutive tokens of a result (ms).
void add_gaps(const EngineResult& r, std::vector<double>& gaps) {
  for (size_t i = 1; i < r.token_times_ms.size(); ++i)
    gaps.push_back(r.token_times_ms[i] - r.token_times_ms[i - 1]);
}

Request greedy_request(std::vector<int32_t> prompt, int gen) {
  Request q;
  q.prompt_tokens = std::move(prompt);
  q.config.max_tokens = gen;  // no stop tokens: every row generates exactly `gen`
  q.use_cache = false;
  return q;
}

RunStats run_clients(const Model& model, const Tokenizer& tok, const EngineOptions& eo, int C,
                     int prompt_tokens, int gen, int salt) {
  Engine engine(model, tok, eo);
  std::vector<RequestHandle> hs;
  const bench::Clock::time_point t0 = bench::Clock::now();
  for (int c = 0; c < C; ++c)
    hs.push_back(engine.submit(
        greedy_request(make_prompt(model.geometry().vocab, prompt_tokens, salt * 1000 + c), gen)));
  std::vector<double> ttft, gaps;
  int64_t generated = 0;
  for (auto& h : hs) {
    const EngineResult& r = h.wait();
    if (r.stop_reason == StopReason::kError) throw InputError("bench serve: " + r.error);
    ttft.push_back(r.ttft_ms);
    add_gaps(r, gaps);
    generated += r.generated_tokens;
  }
  const double wall = bench::ms_since(t0);
  const EngineStats st = engine.stats();
  RunStats s;
  s.tokens_per_s = 1000.0 * static_cast<double>(generated) / wall;
  s.ttft_p50 = quantile(ttft, 0.5);
  s.ttft_p99 = quantile(ttft, 0.99);
  s.itl_p50 = quantile(gaps, 0.5);
  s.itl_p99 = quantile(gaps, 0.99);
  s.overhead_pct = 100.0 * (wall - st.pass_ms) / st.pass_ms;
  return s;
}

// `streams` streams decode `gen` tokens; with `long_prompt` > 0 one prompt of that length arrives
// once every stream has produced 8 tokens. Returns the streams' inter-token p99 (ms) and p50.
std::pair<double, double> run_mixed(const Model& model, const Tokenizer& tok,
                                    const EngineOptions& eo, int streams, int prompt_tokens,
                                    int gen, int long_prompt, int salt, double* long_ttft) {
  Engine engine(model, tok, eo);
  std::atomic<int> ready{0};
  std::vector<RequestHandle> hs;
  for (int c = 0; c < streams; ++c) {
    Request q =
        greedy_request(make_prompt(model.geometry().vocab, prompt_tokens, salt * 1000 + c), gen);
    auto count = std::make_shared<int>(0);
    q.on_chunk = [&ready, count](std::string_view, int32_t) {
      if (++*count == 8) ready.fetch_add(1);
      return true;
    };
    hs.push_back(engine.submit(std::move(q)));
  }
  RequestHandle lp;
  if (long_prompt > 0) {
    while (ready.load() < streams) std::this_thread::sleep_for(std::chrono::microseconds(200));
    lp = engine.submit(
        greedy_request(make_prompt(model.geometry().vocab, long_prompt, salt * 1000 + 999), 1));
  }
  std::vector<double> gaps;
  for (auto& h : hs) add_gaps(h.wait(), gaps);
  if (lp.valid()) *long_ttft = lp.wait().ttft_ms;
  return {quantile(gaps, 0.99), quantile(gaps, 0.5)};
}

struct ChatStats {
  int64_t prompt_tokens = 0, cached_tokens = 0;
  std::vector<int> cached_per_turn, prompt_per_turn;
};

// The scripted chat: each turn sends "System: ...\n\n" + every earlier "User: q\n\nAssistant:
// a\n\n"
// + "User: q\n\nAssistant:" as text; the reply is cleaned as a client shows it (stripped) and
// re-sent in the next turn's history.
ChatStats run_chat(const Model& model, const Tokenizer& tok, int turns, int gen) {
  static const char* const kQuestions[] = {"Hello! Who are you?",
                                           "What is the capital of France?",
                                           "Tell me about its history.",
                                           "Which museums should I visit there?",
                                           "How do I get from the airport to the centre?",
                                           "What food is the city known for?",
                                           "Write a short poem about it.",
                                           "Translate the poem into German.",
                                           "Summarise our conversation in one sentence.",
                                           "Thank you, goodbye!"};
  EngineOptions eo;
  eo.cache_bytes = size_t{512} << 20;
  Engine engine(model, tok, eo);
  std::string history = "System: You are a helpful assistant.\n\n";
  ChatStats s;
  for (int k = 0; k < turns; ++k) {
    history += chat_user_turn(kQuestions[k % 10]);
    Request q;
    q.prompt = history;
    q.config.max_tokens = gen;
    q.config.stop_strings = {std::string(kChatStopString), "\nUser:"};
    q.config.sampling = SamplingConfig::chatrwkv_chat();
    q.config.sampling.seed = static_cast<uint64_t>(k);
    const EngineResult r = engine.submit(std::move(q)).wait();
    if (r.stop_reason == StopReason::kError) throw InputError("bench serve chat: " + r.error);
    s.prompt_tokens += r.prompt_tokens;
    s.cached_tokens += r.cached_tokens;
    s.prompt_per_turn.push_back(r.prompt_tokens);
    s.cached_per_turn.push_back(r.cached_tokens);
    history += " " + chat_clean_message(r.text) + "\n\n";
  }
  return s;
}

void run_bench_serve(const BenchServeOptions& o) {
  if (o.threads > 0) set_cli_threads(o.threads);
  const Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  const auto tok = tokenizer_for(model, o.tokenizer);
  EngineOptions eo;
  const int most = *std::max_element(o.clients.begin(), o.clients.end());
  eo.max_rows = o.max_rows > 0 ? o.max_rows : std::max(most, o.streams + 1);
  if (o.prefill_chunk > 0) {
    eo.prefill_chunk = o.prefill_chunk;
    eo.prefill_chunk_idle = std::max(eo.prefill_chunk_idle, o.prefill_chunk);
  }
  eo.cache_bytes = 0;
  // Warm-up: the first pass pages the mapped weights in and sizes the runtime's buffers.
  run_clients(model, *tok, eo, most, std::min(o.prompt_tokens, 64), 2, 99999);
  std::map<int, std::vector<RunStats>> runs;
  std::vector<double> alone_p99, mixed_p99, alone_p50, mixed_p50, long_ttft;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int C : o.clients)
      runs[C].push_back(run_clients(model, *tok, eo, C, o.prompt_tokens, o.gen, rep * 100 + C));
    if (o.streams > 0) {
      double lt = 0;
      auto [a99, a50] = run_mixed(model, *tok, eo, o.streams, o.prompt_tokens, o.gen, 0, rep, &lt);
      auto [m99, m50] =
          run_mixed(model, *tok, eo, o.streams, o.prompt_tokens, o.gen, o.long_prompt, rep, &lt);
      alone_p99.push_back(a99);
      alone_p50.push_back(a50);
      mixed_p99.push_back(m99);
      mixed_p50.push_back(m50);
      long_ttft.push_back(lt);
    }
  }
  auto med = [](const std::vector<RunStats>& v, double RunStats::*f) {
    std::vector<double> x;
    for (const RunStats& s : v) x.push_back(s.*f);
    return median(x);
  };
  const Geometry& g = model.geometry();
  ChatStats chat;
  if (o.chat_turns > 0) chat = run_chat(model, *tok, o.chat_turns, o.chat_gen);
  const double hit_rate =
      chat.prompt_tokens ? static_cast<double>(chat.cached_tokens) / chat.prompt_tokens : 0.0;
  if (o.json) {
    if (o.chat_turns > 0)
      std::cout << nlohmann::json{{"test", "chat"},
                                  {"turns", o.chat_turns},
                                  {"prompt_tokens", chat.prompt_tokens},
                                  {"cached_tokens", chat.cached_tokens},
                                  {"hit_rate", hit_rate},
                                  {"prompt_tokens_per_turn", chat.prompt_per_turn},
                                  {"cached_tokens_per_turn", chat.cached_per_turn}}
                       .dump()
                << "\n";
    for (int C : o.clients) {
      const auto& v = runs[C];
      std::cout << nlohmann::json{{"test", "clients"},
                                  {"clients", C},
                                  {"tokens_per_s", med(v, &RunStats::tokens_per_s)},
                                  {"ttft_ms_p50", med(v, &RunStats::ttft_p50)},
                                  {"ttft_ms_p99", med(v, &RunStats::ttft_p99)},
                                  {"itl_ms_p50", med(v, &RunStats::itl_p50)},
                                  {"itl_ms_p99", med(v, &RunStats::itl_p99)},
                                  {"engine_overhead_pct", med(v, &RunStats::overhead_pct)},
                                  {"prompt_tokens", o.prompt_tokens},
                                  {"gen", o.gen}}
                       .dump()
                << "\n";
    }
    if (o.streams > 0)
      std::cout << nlohmann::json{{"test", "mixed"},
                                  {"streams", o.streams},
                                  {"long_prompt", o.long_prompt},
                                  {"itl_ms_p99_alone", median(alone_p99)},
                                  {"itl_ms_p99_with_long_prompt", median(mixed_p99)},
                                  {"itl_ms_p50_alone", median(alone_p50)},
                                  {"itl_ms_p50_with_long_prompt", median(mixed_p50)},
                                  {"ratio_p99", median(mixed_p99) / median(alone_p99)},
                                  {"long_prompt_ttft_ms", median(long_ttft)},
                                  {"prefill_chunk", eo.prefill_chunk}}
                       .dump()
                << "\n";
    return;
  }
  fmt::print(
      "model {} (L {}, C {}, vocab {}), {} threads, {} kernels; prompt {} tokens, {} generated "
      "per client, max rows {}, prefill chunk {} (idle {}); medians of {}\n",
      model.info().source, g.n_layer, g.n_embd, g.vocab, model.runtime()->threads(), kernel_isa(),
      o.prompt_tokens, o.gen, eo.max_rows, eo.prefill_chunk, eo.prefill_chunk_idle, o.reps);
  fmt::print("{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "clients", "tok/s", "TTFT p50",
             "TTFT p99", "ITL p50", "ITL p99", "overhead");
  for (int C : o.clients) {
    const auto& v = runs[C];
    fmt::print("{:>8} {:>10.1f} {:>8.1f}ms {:>8.1f}ms {:>8.2f}ms {:>8.2f}ms {:>9.1f}%\n", C,
               med(v, &RunStats::tokens_per_s), med(v, &RunStats::ttft_p50),
               med(v, &RunStats::ttft_p99), med(v, &RunStats::itl_p50), med(v, &RunStats::itl_p99),
               med(v, &RunStats::overhead_pct));
  }
  if (o.streams > 0)
    fmt::print(
        "mixed: {} streams, inter-token p99 {:.2f} ms alone, {:.2f} ms while a {}-token prompt "
        "prefills ({:.2f}x; p50 {:.2f} -> {:.2f} ms); that prompt's TTFT {:.0f} ms\n",
        o.streams, median(alone_p99), median(mixed_p99), o.long_prompt,
        median(mixed_p99) / median(alone_p99), median(alone_p50), median(mixed_p50),
        median(long_ttft));
  if (o.chat_turns > 0)
    fmt::print(
        "chat: {} turns re-sending the history as text: {} of {} prompt tokens from the "
        "prefix cache ({:.1f} %)\n",
        o.chat_turns, chat.cached_tokens, chat.prompt_tokens, 100.0 * hit_rate);
}

}  // namespace

void register_bench_serve(CLI::App* bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve",
      "The serving engine in process: tokens/s, TTFT and inter-token latency per client "
      "count, and streams' latency while a long prompt prefills");
  cmd->add_option("-m,--model", o->model, "Checkpoint; default: the embedded tiny model");
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  cmd->add_option("--tokenizer", o->tokenizer, "Tokenizer file; default as for generate");
  cmd->add_option("--clients", o->clients, "Client counts (default 1,4,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Prompt length per client (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen", o->gen, "Tokens generated per client (default 128)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--long-prompt", o->long_prompt, "Mixed test: the long prompt (default 4096)")
      ->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--streams", o->streams, "Mixed test: decoding streams (default 8; 0 skips it)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--max-rows", o->max_rows, "Engine rows (default: enough for every client)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "Prefill tokens per iteration while rows decode (default: the engine's)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--reps", o->reps, "Repetitions (medians; default 3)")->check(CLI::Range(1, 100));
  cmd->add_option("-t,--threads", o->threads, "Threads (default: WICK_THREADS or one per core)");
  cmd->add_option("--chat-turns", o->chat_turns,
                  "Scripted chat for the prefix-cache hit rate (default 10; 0 skips it)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--chat-gen", o->chat_gen, "Most tokens per chat reply (default 48)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--json", o->json, "One JSON object per test and line");
  cmd->callback([o] { run_bench_serve(*o); });
}

}  // namespace wick::cli
