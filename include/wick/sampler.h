// Token selection from a vector of logits: the wick sampler (docs/tasks.md §1.1-§1.5, the library
// default) and the ChatRWKV-compatible sampler (§1.6; the conventions of BlinkDL/ChatRWKV
// rwkv_pip_package/src/rwkv/utils.py, PIPELINE.sample_logits and PIPELINE.generate).
//
// A Sampler belongs to one generation: it owns the penalty history and the SplitMix64 stream
// (wick/rng.h), so the same config, seed and logits give the same tokens on every run and machine.
// Typical loop: id = sampler.select(logits); sampler.observe(id); logits = model.step(id, state).
//
// Thread-safety: a Sampler is not synchronised; use one per generation (and per thread). The free
// functions are pure and safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wick/rng.h"

namespace wick {

enum class SamplerMode {
  kStandard,  // §1.3: penalties, temperature, one sorted truncation walk (top-k, top-p), one draw
  kChatRwkv,  // §1.6: ChatRWKV's PIPELINE: presence/frequency penalties with decay, top-p cut that
              // keeps ties, top-k, temperature applied after the cuts
};

// "standard" / "chatrwkv".
std::string_view sampler_mode_name(SamplerMode mode);
// The inverse of sampler_mode_name(); throws InputError naming the accepted values otherwise.
SamplerMode parse_sampler_mode(std::string_view name);

struct SamplingConfig {
  SamplerMode mode = SamplerMode::kStandard;
  // Standard: 0 (or less) = greedy argmax, else logits are divided by it before the softmax.
  // ChatRWKV: 0 = "temperature 1 and top_p 0" (the most probable id and its ties), else the kept
  // probabilities are raised to 1/temperature after the cuts (computed as (p / p_max)^(1/T): the
  // same distribution, without underflow at small T). Must be finite and >= 0.
  float temperature = 0.f;
  // Keep at most this many of the most probable ids; 0 = off. Must be >= 0.
  int top_k = 0;
  // Nucleus: keep the shortest prefix of the sorted order whose mass reaches top_p (standard,
  // (0, 1], 1 = off) or every id at least as probable as the id where the running sum reaches it
  // (chatrwkv, [0, 1]: ties with the cutoff survive; >= 1 skips the cut).
  float top_p = 1.f;
  // CTRL penalty (standard only, > 0, 1 = off): a logit x of a seen id becomes x / rp if x > 0,
  // else x * rp. See §1.5: on mostly negative logits it can sharpen instead of penalise. ChatRWKV
  // has no such penalty: validate() rejects any value but 1 in that mode.
  float repetition_penalty = 1.f;
  // Additive penalties (any finite value): a seen id's logit loses presence + weight * frequency,
  // weight being its decayed count in the history.
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  // Every history weight is multiplied by this before a token is observed. [0, 1]; 1 = no decay.
  // Standard mode prunes weights that fall below 1e-6 (and 0 clears the history); ChatRWKV never
  // prunes, so the presence penalty stays on every id ever generated.
  float penalty_decay = 1.f;
  // Seed of the SplitMix64 stream (used as the initial state unchanged, §1.4).
  uint64_t seed = 0;
  // ChatRWKV step H2: a generated token whose text is a space, a tab, one digit or an ascending
  // digit pair enters the history with weight 0 (PIPELINE default: on; the chat demo: off).
  // Needs the Sampler's token_bytes callback. Ignored by the standard sampler.
  bool exempt_space_digits = true;
  // Added to the logit of the id before anything else (both modes); several entries for one id
  // add up. Values must not be NaN (-inf bans, +inf forces).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Ids whose logit becomes -inf (after logit_bias, before the penalties); never selected.
  std::vector<int32_t> banned_tokens;

  // Throws InputError naming the field, the accepted range and the value found, for: temperature
  // negative or not finite; top_k negative; top_p NaN or outside (0, 1] (standard) / [0, 1]
  // (chatrwkv); repetition_penalty NaN, infinite or <= 0, or != 1 in chatrwkv mode;
  // presence/frequency penalty NaN or infinite; penalty_decay NaN or outside [0, 1]; a NaN bias;
  // a negative bias/banned id, or (when vocab > 0) one >= vocab.
  void validate(int vocab = 0) const;

  // §1.6 PIPELINE defaults: chatrwkv, temperature 1, top_p 0.85, top_k 0, presence 0.2,
  // frequency 0.2, decay 0.996, exemption on, seed 0.
  static SamplingConfig chatrwkv_pipeline();
  // §1.6 chat defaults (ChatRWKV API_DEMO_CHAT.py): chatrwkv, temperature 1, top_p 0.3, presence
  // 0.5, frequency 0.5, decay 0.996, id 0 (end of text) lowered by 1e10 (logit_bias {0, -1e10}),
  // exemption off (every token counts 1), seed 0.
  static SamplingConfig chatrwkv_chat();
};

// The softmax every wick sampler uses, exactly (tests and tools can reproduce the sampler's
// probabilities bit for bit): m = the largest value (NaN counts as -inf); e[i] = exp(z[i] - m) in
// f32 by wick's own branch-free exp, the same on every machine (relative error < 1e-7;
// z[i] - m below about -87.7, -inf and NaN give 0; when m = +inf, e[i] = 1 for the +inf entries
// and 0 elsewhere); s = the sum of e in double, as 8 interleaved partial sums (index mod 8) added
// pairwise; p[i] = float(double(e[i]) * (1 / s)). `out` must have z.size() elements and may
// alias z. Throws InputError if z is empty, the sizes differ, or no value is above -inf.
void softmax(std::span<const float> z, std::span<float> out);
std::vector<float> softmax(std::span<const float> z);

// ChatRWKV step H2: true iff `bytes` (a token's bytes) is a non-empty contiguous substring of the
// 12-character string " \t0123456789". Empty bytes (World id 0, or an id the tokenizer cannot
// decode) are not exempt. Every exempt string is ASCII, so no UTF-8 decoding is needed.
bool chatrwkv_exempt_text(std::string_view bytes);

// What a Sampler has learnt during a generation: its RNG position and its penalty history. Saved
// with a state (state files v2, wick/state_file.h) so a seeded generation continued later draws
// exactly what it would have drawn had it never stopped.
struct SamplerSnapshot {
  SamplerMode mode = SamplerMode::kStandard;  // the mode whose history this is
  uint64_t rng_state = 0;                     // SplitMix64::state()
  // id -> weight (decayed count), ascending ids, each id once, weights finite and >= 0.
  std::vector<std::pair<int32_t, float>> history;
  bool operator==(const SamplerSnapshot&) const = default;
};

class Sampler {
 public:
  using TokenBytes = std::function<std::string(int32_t id)>;

  // `vocab` = V, the number of logits select() expects (> 0). `token_bytes(id)` returns the raw
  // bytes of an id (empty for an id without text); it is needed only by chatrwkv mode with
  // exempt_space_digits and is called once per distinct observed id (exceptions propagate from
  // observe()). Throws InputError for vocab <= 0, an invalid config (config.validate(vocab)), or
  // chatrwkv + exempt_space_digits without token_bytes.
  Sampler(SamplingConfig config, int vocab, TokenBytes token_bytes = nullptr);
  ~Sampler();
  Sampler(const Sampler& other);  // copies config, history and RNG position
  Sampler& operator=(const Sampler& other);
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // Chooses one token id from `logits` (V values, f32; NaN counts as -inf) without observing it.
  // Standard: temperature <= 0 is the argmax of the adjusted logits (first maximum wins, no RNG
  // draw); otherwise exactly one uniform() is drawn. ChatRWKV: exactly one uniform() per call,
  // temperature 0 included. The result equals the spec's full stable sort (value descending, ties
  // by ascending id); only the part of the order the walk needs is ever sorted (about 0.2 ms at
  // V = 65536, see bench/bench_sampler.cpp). If the draw lands at or beyond the whole kept mass
  // (uniform() can return 1), the last kept id with a probability > 0 is returned: never a banned
  // or -inf id.
  // Throws InputError if logits.size() != V, or if no id is left with a logit above -inf (all
  // banned / NaN / -inf); the RNG is not advanced then. When the model's logits themselves are
  // all NaN or infinite the message says that the model produced non-finite logits.
  int32_t select(std::span<const float> logits);

  // Adds a chosen id to the penalty history: standard §1.2 (decay, prune < 1e-6, += 1); chatrwkv
  // H1-H3 (decay without pruning, += 0 for an exempt space/digit token, else += 1). The generation
  // loop calls it for every generated token (in chatrwkv mode: not for a stop id).
  // Throws InputError for an id outside [0, V).
  void observe(int32_t id);
  // The prompt's ids: standard mode observes each in order (the loop calls this only with
  // penalize_prompt); chatrwkv mode does nothing, since ChatRWKV never counts prompt tokens.
  void observe_prompt(std::span<const int32_t> ids);
  // Back to the state right after construction: RNG at the seed, empty history.
  void reset();
  // The RNG position and penalty history (ascending ids), for saving.
  SamplerSnapshot snapshot() const;
  // Continues from a snapshot: the RNG position and history are replaced; the config (seed
  // included) is kept for everything else. Throws InputError (sampler unchanged) when the
  // snapshot's mode is not this sampler's, or an id is outside [0, V), repeated or not ascending,
  // or a weight is negative or not finite.
  void restore(const SamplerSnapshot& snap);

  // The logits after logit_bias, banned ids and the mode's penalties (what the softmax or argmax
  // sees before temperature); NaN becomes -inf. For tests and debugging; same errors as select().
  std::vector<float> adjusted_logits(std::span<const float> logits) const;

  // id -> weight (decayed count) of the penalty history.
  const std::unordered_map<int32_t, float>& history() const { return history_; }
  const SamplingConfig& config() const { return config_; }
  int vocab() const { return vocab_; }

 private:
  struct Workspace;  // scratch buffers reused across select() calls (sampler.cpp)

  void adjust_into(std::span<const float> logits, std::vector<float>& out) const;
  // -1 when every adjusted logit is -inf (select() then throws).
  int32_t select_standard(std::vector<float>& adjusted);
  int32_t select_chatrwkv(std::vector<float>& adjusted);
  float exemption_weight(int32_t id);

  SamplingConfig config_;
  int vocab_;
  TokenBytes token_bytes_;
  SplitMix64 rng_;
  std::unordered_map<int32_t, float> history_;
  std::vector<int8_t> exempt_cache_;  // chatrwkv H2 per id: -1 unknown, 0 counts, 1 exempt
  std::unique_ptr<Workspace> ws_;
};

}  // namespace wick
