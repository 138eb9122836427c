#include "generation_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "wick/errors.h"
#include "wick/tuned_state.h"

namespace wick::cli {

void add_generation_flags(CLI::App* cmd, GenerationFlags& f, bool chat) {
  const std::string g = "Sampling";
  cmd->add_option("--sampler", f.sampler,
                  chat ? "standard | chatrwkv (default: chatrwkv with ChatRWKV's chat defaults: "
                         "temperature 1, top-p 0.3, presence/frequency 0.5, decay 0.996, id 0 "
                         "suppressed)"
                       : "standard (default; greedy until --temperature > 0) | "
                         "chatrwkv (the rwkv pip package's PIPELINE: temperature 1, top-p 0.85, "
                         "presence/frequency 0.2, decay 0.996)")
      ->check(CLI::IsMember({"standard", "chatrwkv"}))
      ->group(g);
  cmd->add_option("--temperature", f.temperature, "Temperature (>= 0; 0 = greedy)")->group(g);
  cmd->add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 = off)")->group(g);
  cmd->add_option("--top-p", f.top_p, "Nucleus: keep the smallest set with this mass (0, 1]")
      ->group(g);
  cmd->add_option("--presence-penalty", f.presence, "Subtracted once from every seen token")
      ->group(g);
  cmd->add_option("--frequency-penalty", f.frequency, "Subtracted per (decayed) occurrence")
      ->group(g);
  cmd->add_option("--penalty-decay", f.decay, "Occurrence weights decay by this per token [0, 1]")
      ->group(g);
  cmd->add_option("--repetition-penalty", f.repetition,
                  "CTRL penalty (> 0, 1 = off; standard sampler only). Note: on mostly negative "
                  "logits it sharpens the distribution and can increase repeats; prefer "
                  "presence/frequency penalties")
      ->group(g);
  cmd->add_option("--seed", f.seed, "Seed of the sampler's SplitMix64 stream (default 0)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.find('-') != std::string::npos
                       ? std::string("a seed is an unsigned 64-bit integer (0 or more), found " + v)
                       : std::string();
          },
          "UINT"))
      ->group(g);
  cmd->add_option("--logit-bias", f.logit_bias, "ID=VALUE added to a token's logit (repeatable)")
      ->allow_extra_args(false)
      ->group(g);
  cmd->add_option("--ban", f.ban, "Token id never to generate (repeatable)")
      ->allow_extra_args(false)
      ->group(g);
  if (!chat) {
    cmd->add_flag("--penalize-prompt", f.penalize_prompt,
                  "Prompt tokens count for the penalties (standard sampler)")
        ->group(g);
  }
  const std::string s = "Stopping and state";
  cmd->add_option("--stop", f.stop,
                  "Stop string (repeatable; \\n \\t \\r \\\\ \\xNN are interpreted); cut from the "
                  "output")
      ->allow_extra_args(false)
      ->group(s);
  cmd->add_flag("--no-stop-eot", f.no_stop_eot,
                "Do not stop at the end-of-text id (World-vocabulary models stop at id 0 by "
                "default, as ChatRWKV and ai00 do)");
  cmd->add_option("--stop-token", f.stop_tokens, "Token id that ends generation (repeatable)")
      ->allow_extra_args(false)
      ->group(s);
  cmd->add_option("--load-state", f.load_state, "Continue from a state file")->group(s);
  cmd->add_option("--init-state", f.init_state,
                  "Start from a state-tuned initial state (RWKV-PEFT time_state file, .pth or "
                  ".safetensors; not with --load-state)")
      ->group(s);
  cmd->add_flag("--allow-other-base", f.allow_other_base,
                "Accept a state file saved by other weights (a warning is printed)")
      ->group(s);
  if (!chat) {
    cmd->add_option("--save-state", f.save_state,
                    "Save the state after generation (prompt and output absorbed)")
        ->group(s);
    cmd->add_option("--state-note", f.state_note, "Free text stored in the saved state file")
        ->group(s);
    const std::string sp = "Speculative decoding";
    cmd->add_option("--speculate", f.speculate,
                    "ngram: draft tokens by looking up the last 2..8 tokens earlier in prompt + "
                    "output and verify them in one pass (output identical to plain decoding)")
        ->group(sp);
    cmd->add_option("--draft", f.draft,
                    "Most draft tokens verified per pass with --speculate (1.." +
                        std::to_string(SpeculativeConfig::kMaxDraft) + ", default " +
                        std::to_string(kDefaultDraft) + ")")
        ->group(sp);
  }
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 1 == s.size())
      throw InputError("'" + s + "' ends with a lone backslash; write \\\\ for a backslash");
    const char c = s[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x': {
        auto hex = [&](size_t k) -> int {
          if (k >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[k]))) return -1;
          const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(s[k])));
          return h <= '9' ? h - '0' : h - 'a' + 10;
        };
        const int hi = hex(i + 1), lo = hex(i + 2);
        if (hi < 0 || lo < 0)
          throw InputError("'" + s + "': \\x must be followed by two hex digits");
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        break;
      }
      default:
        out += '\\';
        out += c;  // unknown escapes stay as typed
    }
  }
  return out;
}

GenerationConfig make_generation_config(const GenerationFlags& f, GenerationConfig base,
                                        int vocab) {
  SamplingConfig& sc = base.sampling;
  if (f.sampler == "chatrwkv" && sc.mode != SamplerMode::kChatRwkv) {
    const uint64_t seed = sc.seed;
    sc = SamplingConfig::chatrwkv_pipeline();
    sc.seed = seed;
  } else if (f.sampler == "standard" && sc.mode != SamplerMode::kStandard) {
    sc = SamplingConfig{};
  }
  if (f.temperature) sc.temperature = *f.temperature;
  if (f.top_k) sc.top_k = *f.top_k;
  if (f.top_p) sc.top_p = *f.top_p;
  if (f.presence) sc.presence_penalty = *f.presence;
  if (f.frequency) sc.frequency_penalty = *f.frequency;
  if (f.decay) sc.penalty_decay = *f.decay;
  if (f.repetition) sc.repetition_penalty = *f.repetition;
  if (f.seed) sc.seed = *f.seed;
  for (const std::string& b : f.logit_bias) {
    const size_t eq = b.find('=');
    size_t used_id = 0, used_v = 0;
    int32_t id = -1;
    float v = 0;
    bool ok = eq != std::string::npos;
    try {
      if (ok) {
        id = std::stoi(b.substr(0, eq), &used_id);
        v = std::stof(b.substr(eq + 1), &used_v);
        ok = used_id == eq && used_v == b.size() - eq - 1;
      }
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) throw InputError("--logit-bias '" + b + "': expected ID=VALUE, e.g. 0=-100");
    sc.logit_bias.emplace_back(id, v);
  }
  sc.banned_tokens.insert(sc.banned_tokens.end(), f.ban.begin(), f.ban.end());
  for (const std::string& s : f.stop) base.stop_strings.push_back(unescape(s));
  base.stop_tokens.insert(base.stop_tokens.end(), f.stop_tokens.begin(), f.stop_tokens.end());
  if (!f.no_stop_eot)
    for (int32_t t : default_stop_tokens(vocab))
      if (std::find(base.stop_tokens.begin(), base.stop_tokens.end(), t) == base.stop_tokens.end())
        base.stop_tokens.push_back(t);
  if (f.penalize_prompt) base.penalize_prompt = true;
  if (!f.speculate.empty() && f.speculate != "ngram")
    throw InputError("--speculate '" + f.speculate +
                     "': unknown method; the one available is 'ngram' (prompt lookup)");
  if (f.draft && f.speculate.empty())
    throw InputError(
        "--draft sets the draft length of speculative decoding: add --speculate ngram");
  if (f.draft && (*f.draft < 1 || *f.draft > SpeculativeConfig::kMaxDraft))
    throw InputError("--draft must be 1.." + std::to_string(SpeculativeConfig::kMaxDraft) +
                     " draft tokens per pass, got " + std::to_string(*f.draft));
  if (f.speculate == "ngram") base.speculative.n_max = f.draft.value_or(kDefaultDraft);
  base.validate(vocab);
  if (sc.mode == SamplerMode::kStandard && sc.temperature == 0.f && (f.top_k || f.top_p || f.seed))
    std::fprintf(stderr,
                 "wick: warning: temperature is 0 (greedy), so --top-k/--top-p/--seed have no "
                 "effect; add --temperature (e.g. 1) to sample\n");
  return base;
}

void check_save_state_path(const GenerationFlags& f) {
  if (f.save_state.empty()) return;
  namespace fs = std::filesystem;
  const fs::path p(f.save_state);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (fs::is_directory(p, ec))
    throw FileError(f.save_state, "--save-state names a folder; give a file path");
  if (!fs::is_directory(dir, ec))
    throw FileError(f.save_state, "--save-state: the folder " + dir.string() +
                                      " does not exist (checked before generating)");
  if (::access(dir.c_str(), W_OK) != 0)
    throw FileError(f.save_state, "--save-state: cannot write in " + dir.string() +
                                      " (checked before generating)");
}

State initial_state(const GenerationFlags& f, const Model& model, int64_t& n_tokens,
                    Continuation* continuation) {
  if (!f.init_state.empty() && !f.load_state.empty())
    throw InputError("--init-state and --load-state both give the state to start from; use one");
  if (!f.init_state.empty()) {
    n_tokens = 0;
    return load_tuned_state(f.init_state, model);
  }
  if (f.load_state.empty()) {
    n_tokens = 0;
    return model.new_state();
  }
  LoadedState loaded = load_state(f.load_state, model, f.allow_other_base);
  for (const std::string& w : loaded.warnings)
    std::fprintf(stderr, "wick: warning: %s\n", w.c_str());
  n_tokens = loaded.info.n_tokens;
  if (continuation) *continuation = std::move(loaded.info.continuation);
  return std::move(loaded.state);
}

Continuation continuation_for(const GenerationFlags& f, Continuation loaded,
                              const GenerationConfig& config) {
  // A new --seed starts a fresh sampler; so does another --sampler mode (said on stderr).
  if (loaded.sampler && !f.seed && loaded.sampler->mode != config.sampling.mode)
    std::fprintf(stderr,
                 "wick: note: %s holds the %s sampler's state but this run uses the %s sampler; "
                 "starting a fresh one (give the same --sampler to continue it)\n",
                 f.load_state.c_str(), std::string(sampler_mode_name(loaded.sampler->mode)).c_str(),
                 std::string(sampler_mode_name(config.sampling.mode)).c_str());
  return continue_with(std::move(loaded), config.sampling, /*resume_sampler=*/!f.seed);
}

void maybe_save_state(const GenerationFlags& f, const State& state, const Model& model,
                      const Tokenizer& tokenizer, int64_t n_tokens,
                      const Continuation& continuation) {
  if (f.save_state.empty()) return;
  StateFileInfo info;
  info.note = f.state_note;
  info.tokenizer = std::string(tokenizer.name());
  info.n_tokens = n_tokens;
  info.continuation = continuation;
  save_state(f.save_state, state, model, info);
}

}  // namespace wick::cli
