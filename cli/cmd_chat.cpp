// wick chat [--model PATH] [sampling flags] [--load-state F]: an interactive REPL in the RWKV World
// chat format (docs/tasks.md §2.6). Each user message is cleaned and fed as
// "User: {message}\n\nAssistant:"; the reply streams until the stop string "\n\n". The history
// lives in the recurrent state (nothing is re-fed). Commands: /save F, /load F, /reset,
// /regenerate, /help, /quit. Ctrl-C cancels the reply being generated, not the program; at the
// prompt it says how to leave (a second Ctrl-C in a row quits). A line ending in a backslash
// continues the message on the next line.
// Replies go to stdout; prompts ("User: ") and command messages go to stderr when stdin is a
// terminal (piped input gets only the replies, one per line).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>

#include "commands.h"
#include "common.h"
#include "generation_options.h"
#include "wick/chat.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/state_file.h"

namespace wick::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted.store(true);
}

// Installs the Ctrl-C handler for the duration of a reply; the default action is restored after.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptScope() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

struct ChatOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model;
  std::string tokenizer;
  int max_tokens = 1000;
  bool intro = false;
  GenerationFlags flags;
};

// One conversation: one row, no queue, no prefix cache (its state travels with each request).
EngineOptions one_row_engine() {
  EngineOptions o;
  o.max_rows = 1;
  o.queue_length = 1;
  o.cache_bytes = 0;
  return o;
}

class ChatSession {
 public:
  ChatSession(const ChatOptions& o, bool interactive)
      : o_(o),
        interactive_(interactive),
        model_(with_attention_flags(load_model_or_default(o.model, o.load), o.attention)),
        tokenizer_(tokenizer_for(model_, o.tokenizer)),
        // Replies run on the serving engine (the one generation loop); the conversation's state
        // travels with each request, so the prefix cache is not needed.
        engine_(model_, *tokenizer_, one_row_engine()) {
    GenerationConfig base;
    base.max_tokens = o.max_tokens;
    base.sampling = SamplingConfig::chatrwkv_chat();
    base.stop_strings = {std::string(kChatStopString)};
    config_ = make_generation_config(o.flags, base, model_.geometry().vocab);
    int64_t n = 0;
    state_ = initial_state(o.flags, model_, n);
    if (o.intro && o.flags.load_state.empty()) feed(std::string(kChatIntro));
    initial_ = state_;
  }

  void run() {
    // At the prompt Ctrl-C no longer ends the program (and the conversation with it): the first
    // says how to leave, a second in a row quits. Without SA_RESTART the read returns at once.
    std::optional<InterruptScope> at_prompt;
    if (interactive_) {
      at_prompt.emplace();
      info(
          "[type a message; a line ending in \\ continues on the next; /help lists the commands; "
          "/quit or Ctrl-D leaves]");
    }
    std::string line;
    int interrupts_in_a_row = 0;
    while (true) {
      if (interactive_) std::fputs("User: ", stderr);
      g_interrupted.store(false);
      if (!read_message(line)) {
        if (!g_interrupted.load()) break;  // end of input
        std::cin.clear();
        clearerr(stdin);
        if (++interrupts_in_a_row >= 2) break;
        info("\n[Ctrl-C: the conversation is kept; /quit or Ctrl-D leaves, Ctrl-C again quits]");
        continue;
      }
      interrupts_in_a_row = 0;
      if (!line.empty() && line[0] == '/') {
        if (!command(line)) break;
        continue;
      }
      if (chat_clean_message(line).empty()) continue;
      last_turn_ = chat_user_turn(line);
      before_turn_ = state_;
      reply();
    }
  }

 private:
  void info(const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); }

  // One message: a line, or several when each but the last ends in a backslash (a pasted
  // multi-line message is one turn). False at end of input or when a read is interrupted.
  bool read_message(std::string& message) {
    message.clear();
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\\') {
        line.pop_back();
        message += line + "\n";
        if (interactive_) std::fputs("... ", stderr);
        continue;
      }
      message += line;
      return true;
    }
    if (!message.empty() && !g_interrupted.load()) return true;  // input ended after a backslash
    return false;
  }

  void feed(const std::string& text) {
    const std::vector<int32_t> ids = tokenizer_->encode(text);
    if (!ids.empty()) model_.forward(ids, state_);
  }

  // Generates a reply to last_turn_ from the current state (which has not seen the turn yet).
  void reply() {
    GenerationConfig cfg = config_;
    cfg.sampling.seed = config_.sampling.seed + replies_++;  // a regenerated reply differs
    if (interactive_) std::fputs("Assistant:", stdout);
    std::fflush(stdout);
    GenerationResult r;
    try {
      InterruptScope scope;
      Request q;
      q.prompt = last_turn_;
      q.config = cfg;
      q.initial_state = state_;
      q.use_cache = false;
      q.on_chunk = [](std::string_view chunk, int32_t) {  // on the engine thread
        std::fwrite(chunk.data(), 1, chunk.size(), stdout);
        std::fflush(stdout);
        return !g_interrupted.load();
      };
      EngineResult done = engine_.submit(std::move(q)).wait();
      if (done.stop_reason == StopReason::kError) std::rethrow_exception(done.exception);
      state_ = std::move(done.state);
      r = std::move(done);
    } catch (const Error& e) {
      // Keep the conversation: back to the state before this turn.
      state_ = before_turn_;
      std::fputc('\n', stdout);
      std::fflush(stdout);
      info(std::string("error: ") + e.what() + " (the message was not added to the conversation)");
      return;
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (r.stop_reason == StopReason::kKvCacheFull) {
      info("[the KV cache is full (--kv-max " + std::to_string(model_.attention().kv_max) +
           "): /reset or /load to go on, or restart with a larger --kv-max]");
      return;
    }
    try {
      if (r.stop_reason == StopReason::kCancelled) {
        feed("\n\n");  // close the interrupted turn so the next one starts cleanly
        info("[reply cancelled]");
      } else if (r.stop_reason == StopReason::kMaxTokens ||
                 r.stop_reason == StopReason::kStopToken) {
        feed("\n\n");
        info("[reply cut at --max-tokens " + std::to_string(cfg.max_tokens) + "]");
      }
    } catch (const ContextFullError& e) {
      info(std::string("[") + e.what() + "]");
    }
  }

  // Returns false to quit.
  bool command(const std::string& line) {
    const size_t sp = line.find(' ');
    const std::string cmd = line.substr(0, sp);
    const std::string arg = sp == std::string::npos ? "" : chat_clean_message(line.substr(sp + 1));
    try {
      if (cmd == "/quit" || cmd == "/exit") return false;
      if (cmd == "/help") {
        info(
            "/save FILE  save the conversation state\n/load FILE  continue a saved state\n"
            "/reset      start over (initial state)\n/regenerate answer the last message again\n"
            "/quit       leave (also Ctrl-D); Ctrl-C cancels a reply");
      } else if (cmd == "/save" && !arg.empty()) {
        StateFileInfo fi;
        fi.tokenizer = std::string(tokenizer_->name());
        fi.note = "wick chat";
        save_state(arg, state_, model_, fi);
        info("[saved " + arg + "]");
      } else if (cmd == "/load" && !arg.empty()) {
        LoadedState loaded = load_state(arg, model_, o_.flags.allow_other_base);
        for (const std::string& w : loaded.warnings) info("warning: " + w);
        state_ = std::move(loaded.state);
        last_turn_.clear();
        info("[loaded " + arg + "]");
      } else if (cmd == "/reset") {
        state_ = initial_;
        last_turn_.clear();
        info("[reset]");
      } else if (cmd == "/regenerate") {
        if (last_turn_.empty()) {
          info("[nothing to regenerate]");
        } else {
          state_ = before_turn_;
          reply();
        }
      } else {
        info("unknown command '" + line + "'; /help lists the commands");
      }
    } catch (const Error& e) {
      info(std::string("error: ") + e.what());  // a bad file must not end the conversation
    }
    return true;
  }

  const ChatOptions& o_;
  bool interactive_;
  Model model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Engine engine_;
  GenerationConfig config_;
  State state_, initial_, before_turn_;
  std::string last_turn_;
  uint64_t replies_ = 0;
};

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand(
      "chat",
      "Interactive chat in the RWKV World format (User: ... / Assistant: ...), history "
      "kept as state. Commands: /save F, /load F, /reset, /regenerate, /help, /quit");
  cmd->add_option("-m,--model", o->model,
                  "Checkpoint (.safetensors, .pth or HF folder); default: the embedded tiny model");
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or tokenizer.json; default as for generate");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Tokens per reply at most (default 1000)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_flag("--intro", o->intro,
                "Start with ChatRWKV's canned first exchange (without --load-state)");
  add_generation_flags(cmd, o->flags, /*chat=*/true);
  cmd->callback([o] {
    ChatSession session(*o, isatty(STDIN_FILENO) != 0);
    session.run();
  });
}

}  // namespace wick::cli
