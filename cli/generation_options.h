// Command-line flags shared by `wick generate` and `wick chat`: the sampler (docs/tasks.md §1),
// stop conditions and state files.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wick/generate.h"
#include "wick/model.h"
#include "wick/state_file.h"
#include "wick/tokenizer.h"

namespace wick::cli {

struct GenerationFlags {
  std::string sampler;  // "" (the command's default), "standard" or "chatrwkv"
  std::optional<float> temperature, top_p, presence, frequency, decay, repetition;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> logit_bias;  // "ID=VALUE"
  std::vector<int32_t> ban;
  std::vector<std::string> stop;  // backslash escapes interpreted
  std::vector<int32_t> stop_tokens;
  bool penalize_prompt = false;
  bool no_stop_eot = false;  // do not add default_stop_tokens(vocab) (World: id 0)
  std::string load_state, save_state, state_note;
  std::string init_state;  // a state-tuning file (wick/tuned_state.h); excludes load_state
  bool allow_other_base = false;
  // Speculative decoding (wick generate only): --speculate METHOD ("ngram") and --draft K.
  std::string speculate;
  std::optional<int> draft;
};

// Adds the sampling, stop and state flags to `cmd`. `chat` hides the flags chat does not use.
void add_generation_flags(CLI::App* cmd, GenerationFlags& f, bool chat);

// The config: `base` (the command's defaults) with every flag the user gave applied over it, and
// the model's end-of-text ids (wick/generate.h default_stop_tokens) unless --no-stop-eot.
// --speculate ngram sets GenerationConfig::speculative (n_max = --draft, default kDefaultDraft).
// Throws InputError for malformed values (the config is validated against `vocab`), a
// --speculate other than "ngram", and --draft without --speculate.
// Draft tokens per pass with --speculate ngram and no --draft.
inline constexpr int kDefaultDraft = 8;

GenerationConfig make_generation_config(const GenerationFlags& f, GenerationConfig base, int vocab);

// "\n", "\t", "\r", "\\", "\xNN" -> the bytes; other text unchanged. Throws InputError for a
// malformed \x escape or a trailing backslash.
std::string unescape(const std::string& s);

// The state to start from: loaded from --load-state (warnings printed to stderr), or the
// state-tuned initial state of --init-state (n_tokens 0), else zero. Throws InputError when both
// are given, and what load_state() / load_tuned_state() throw.
// n_tokens receives the tokens the loaded state had absorbed (0 for a fresh one, -1 unknown);
// `continuation`, when given, what the file stored for continuing it (state files v2).
State initial_state(const GenerationFlags& f, const Model& model, int64_t& n_tokens,
                    Continuation* continuation = nullptr);

// What a generation continues from: the loaded file's logits, and its sampler unless --seed
// starts a fresh one or the file's sampler is of another mode than `config`'s (a note on stderr
// says so then).
Continuation continuation_for(const GenerationFlags& f, Continuation loaded,
                              const GenerationConfig& config);

// Checks before any work that --save-state can be written (its folder exists and is writable), so
// a bad path fails at once instead of after the whole generation. Throws FileError naming it.
void check_save_state_path(const GenerationFlags& f);
// Saves to --save-state if given, with the tokenizer name and token count in the contract and
// `continuation` (the generation's logits and sampler, so an empty prompt can go on from it).
void maybe_save_state(const GenerationFlags& f, const State& state, const Model& model,
                      const Tokenizer& tokenizer, int64_t n_tokens,
                      const Continuation& continuation = {});

}  // namespace wick::cli
