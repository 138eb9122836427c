// wick generate --prompt TEXT [--model PATH] [--max-tokens N] [sampling flags] [--stop S]...
//               [--stream] [--json] [--load-state F] [--save-state F] [--batch-file F]
//               [--speculate ngram [--draft K]]
// Text mode prints the generated text (with --stream: chunk by chunk as it is produced) and a
// timing line on stderr. --json prints one JSON object: {"tokens", "text", "stop_reason",
// ["stop_token" | "stop_string"], "prompt_tokens", "generated_tokens", ["speculative": {"drafted",
// "accepted", "passes"} with --speculate], "timings"}; with --stream,
// one {"chunk", "token"} line per callback comes first (token: the id generated at that step;
// chunk: the text it made safe to show, see wick/generate.h ChunkCallback). --batch-file reads JSON
// lines
// {"prompt": TEXT} and prints one JSON result per line, in input order (always JSON).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "generation_options.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/generate.h"

namespace wick::cli {
namespace {

// SIGINT while generating: the first sets the flag the chunk callback reads (the generation then
// ends with stop_reason "cancelled"), the second exits at once with status 130.
volatile std::sig_atomic_t g_interrupts = 0;

extern "C" void on_interrupt(int) {
  if (g_interrupts > 0) _exit(130);
  g_interrupts = 1;
  static const char kMsg[] =
      "\nwick: interrupted: stopping after this token (Ctrl-C again quits)\n";
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
}

bool interrupted() {
  return g_interrupts > 0;
}

// Installs on_interrupt for its lifetime, then restores the previous handler.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &previous_, nullptr); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_ {};
};

struct GenerateOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model;
  std::string prompt;
  bool prompt_given = false;
  std::string tokenizer;
  int max_tokens = 128;
  bool json = false;
  bool stream = false;
  bool quiet = false;  // no "[wick] ..." summary on stderr
  std::string batch_file;
  int batch_size = 16;
  GenerationFlags flags;
};

std::string dump(const nlohmann::json& j) {
  // Text is valid UTF-8 already; `replace` only guards against surprises.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// `speculative`: --speculate was given (the result then reports its counters).
nlohmann::json result_json(const GenerationResult& r, double load_ms, bool speculative) {
  nlohmann::json j;
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["stop_reason"] = std::string(stop_reason_name(r.stop_reason));
  if (r.stop_reason == StopReason::kStopToken) j["stop_token"] = r.stop_token;
  if (r.stop_reason == StopReason::kStopString) j["stop_string"] = r.stop_string;
  j["prompt_tokens"] = r.prompt_tokens;
  j["generated_tokens"] = r.generated_tokens;
  if (speculative)
    j["speculative"] = {{"drafted", r.speculative.drafted},
                        {"accepted", r.speculative.accepted},
                        {"passes", r.speculative.passes}};
  const GenerationTimings& t = r.timings;
  j["timings"] = {
      {"load_ms", load_ms},
      {"prefill_ms", t.prefill_ms},
      {"decode_ms", t.decode_ms},
      {"sample_ms", t.sample_ms},
      {"prefill_tokens_per_s", t.prefill_ms > 0 ? 1000.0 * r.prompt_tokens / t.prefill_ms : 0.0},
      {"decode_tokens_per_s", t.decode_ms > 0 ? 1000.0 * t.decode_steps / t.decode_ms : 0.0},
  };
  return j;
}

// JSON lines of {"prompt": TEXT}; blank lines are skipped.
std::vector<std::string> read_batch_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open the batch file");
  std::vector<std::string> prompts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      throw InputError(path + ":" + std::to_string(n) +
                       ": expected a JSON object with a string \"prompt\", e.g. {\"prompt\": "
                       "\"Hello\"}");
    prompts.push_back(j["prompt"].get<std::string>());
  }
  if (prompts.empty()) throw InputError(path + ": no prompts found (expected JSON lines)");
  return prompts;
}

void run_batch(const GenerateOptions& o, const Model& model, const Tokenizer& tokenizer,
               const GenerationConfig& cfg, double load_ms) {
  if (o.prompt_given) throw InputError("--prompt and --batch-file exclude each other");
  if (o.stream) throw InputError("--stream is not available with --batch-file");
  if (!o.flags.save_state.empty())
    throw InputError("--save-state saves one state; it cannot be combined with --batch-file");
  if (o.batch_size < 1)
    throw InputError("--batch-size must be at least 1, got " + std::to_string(o.batch_size));
  const std::vector<std::string> texts = read_batch_file(o.batch_file);
  int64_t n_loaded = 0;
  const State start = initial_state(o.flags, model, n_loaded);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < texts.size(); ++i) {
    prompts.push_back(tokenizer.encode(texts[i]));
    if (prompts.back().empty())
      throw InputError(o.batch_file + ": prompt " + std::to_string(i + 1) +
                       " is empty; every line needs a non-empty \"prompt\"");
  }
  // Continuous batching on the engine: at most --batch-size rows run at once (bounding the
  // memory of a pass), a finished row's place is taken at the next iteration, prompts sharing a
  // prefix reuse its state from the prefix cache. Row i samples with seed + i, so the output does
  // not depend on the batch size or on the other rows (batch invariance).
  EngineOptions eo;
  eo.max_rows = o.batch_size;
  eo.queue_length = static_cast<int>(prompts.size());
  eo.prefill_chunk_idle = std::max(eo.prefill_chunk, 2048);
  Engine engine(model, tokenizer, eo);
  std::string state_id;
  if (!(start == model.new_state())) {
    state_id = "start";
    engine.register_state(state_id, start);
  }
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request q;
    q.prompt_tokens = std::move(prompts[i]);
    q.config = cfg;
    q.config.sampling.seed = cfg.sampling.seed + i;
    q.state_id = state_id;
    handles.push_back(engine.submit(std::move(q)));
  }
  for (const RequestHandle& h : handles) {
    const EngineResult& r = h.wait();
    if (r.stop_reason == StopReason::kError) std::rethrow_exception(r.exception);
    nlohmann::json j = result_json(r, load_ms, cfg.speculative.enabled());
    j["cached_tokens"] = r.cached_tokens;
    std::cout << dump(j) << "\n" << std::flush;
  }
}

void run_generate(const GenerateOptions& o) {
  check_save_state_path(o.flags);
  const auto t0 = std::chrono::steady_clock::now();
  Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto tokenizer = tokenizer_for(model, o.tokenizer);
  GenerationConfig base;
  base.max_tokens = o.max_tokens;
  const GenerationConfig cfg = make_generation_config(o.flags, base, model.geometry().vocab);
  if (!o.batch_file.empty()) return run_batch(o, model, *tokenizer, cfg, load_ms);
  if (!o.prompt_given) throw InputError("--prompt is required (or --batch-file)");

  int64_t n_tokens = 0;
  Continuation loaded;
  State state = initial_state(o.flags, model, n_tokens, &loaded);
  // A state saved by a generation (format 2) goes on without new text: an empty prompt picks the
  // next token from its stored logits, and its sampler resumes unless --seed is given.
  const Continuation from = continuation_for(o.flags, std::move(loaded), cfg);
  if (o.prompt.empty() && !from.has_logits())
    throw InputError(o.flags.load_state.empty()
                         ? "--prompt is empty: generation needs text to start from (or a state "
                           "saved by a generation: --load-state FILE --prompt \"\")"
                         : "--prompt is empty and " + o.flags.load_state +
                               " holds no logits to continue from (a state file of format 1, or "
                               "one saved without them): give some text, or save the state again "
                               "with this version of wick");
  // The first Ctrl-C cancels the generation: the result is printed (stop_reason "cancelled") and
  // the state saved as usual; a second one quits at once.
  const InterruptGuard interrupts;
  const ChunkCallback on_chunk = [&o](std::string_view chunk, int32_t token) {
    if (o.stream) {
      if (o.json) {
        std::cout << dump({{"chunk", std::string(chunk)}, {"token", token}}) << "\n" << std::flush;
      } else {
        std::fwrite(chunk.data(), 1, chunk.size(), stdout);
        std::fflush(stdout);
      }
    }
    return !interrupted();
  };
  const GenerationResult r = generate(model, *tokenizer, o.prompt, cfg, state, from, on_chunk);
  // The result is printed before the state is saved: a bad --save-state path must not lose it.
  if (o.json) {
    std::cout << dump(result_json(r, load_ms, cfg.speculative.enabled())) << "\n" << std::flush;
  } else {
    if (!o.stream) std::fwrite(r.text.data(), 1, r.text.size(), stdout);
    // A terminal gets a newline so the prompt comes back on a line of its own; a pipe or a file
    // gets exactly the text.
    if (isatty(fileno(stdout))) std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  maybe_save_state(o.flags, state, model, *tokenizer,
                   n_tokens < 0 ? -1 : n_tokens + r.prompt_tokens + r.generated_tokens,
                   r.continuation);
  if (o.json || o.quiet) return;
  std::fprintf(
      stderr, "[wick] %d prompt tokens in %.2f ms, %d tokens in %.2f ms (%.1f tok/s), stop: %s\n",
      r.prompt_tokens, r.timings.prefill_ms, r.generated_tokens, r.timings.decode_ms,
      r.timings.decode_ms > 0 ? 1000.0 * r.timings.decode_steps / r.timings.decode_ms : 0.0,
      std::string(stop_reason_name(r.stop_reason)).c_str());
  if (cfg.speculative.enabled())
    std::fprintf(stderr, "[wick] speculative: %d drafted, %d accepted, %d passes\n",
                 r.speculative.drafted, r.speculative.accepted, r.speculative.passes);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd =
      app.add_subcommand("generate",
                         "Generate text from a prompt (greedy by default; sampling, stop strings, "
                         "streaming, state files, batches)");
  cmd->add_option("-m,--model", o->model,
                  "Checkpoint (.safetensors, .pth or HF folder); default: the embedded tiny model");
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  auto* prompt = cmd->add_option(
      "-p,--prompt", o->prompt,
      "Prompt text; may be empty with --load-state of a state saved by a generation (it goes on "
      "from the stored logits, resuming the stored sampler unless --seed is given)");
  cmd->add_option(
      "--tokenizer", o->tokenizer,
      "World vocabulary (.txt) or HuggingFace tokenizer.json (BPE); default: byte-level "
      "for 256-token models, the embedded World vocabulary for 65536");
  cmd->add_option("-n,--max-tokens", o->max_tokens,
                  "Tokens to generate (default 128; 0 only folds the prompt into the state)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_flag("--json", o->json, "Print a JSON object instead of the text");
  cmd->add_flag("--stream", o->stream, "Print text as it is generated (with --json: JSON lines)");
  cmd->add_flag("-q,--quiet", o->quiet, "No '[wick] ...' summary line on stderr");
  cmd->add_option("--batch-file", o->batch_file,
                  "JSON lines {\"prompt\": ...}: generate for all at once, one JSON result per "
                  "line in order; row i samples with seed + i");
  cmd->add_option("--batch-size", o->batch_size,
                  "Rows generated together with --batch-file (default 16; bounds memory)")
      ->check(CLI::Range(1, 4096));
  add_generation_flags(cmd, o->flags, /*chat=*/false);
  cmd->callback([o, prompt] {
    o->prompt_given = prompt->count() > 0;
    run_generate(*o);
  });
}

}  // namespace wick::cli
