// State files: a State saved as safetensors so a context can be resumed later, on another run or
// machine (docs/tasks.md §3.5, kind `snapshot`).
//
// Layout (little-endian safetensors):
//   wkv         F32 [L, 1, H, N, N]  WKV matrices (row = value channel, column = key channel)
//   tmix_shift  F32 [L, 1, 1, C]     time-mix token shift (ln1 output of the last token)
//   cmix_shift  F32 [L, 1, 1, C]     channel-mix token shift (ln2 output of the last token)
// RWKV-X models (docs/rwkvx.md) add, for N_a attention blocks and T cached tokens:
//   attn_cmix_shift F32 [N_a, 1, 1, C]  each attention block's channel-mix token shift
//   attn_k_cache    F32 [N_a, T, C]     K rows of every attention block, in position order
//   attn_v_cache    F32 [N_a, T, C]     V rows, likewise
// and the metadata `n_attn` (N_a) and `kv_length` (T); a file without `n_attn` has none.
// Format 2 adds what continuing the state needs (wick/continuation.h), each part optional:
//   logits                   F32 [V]  the logits after the last absorbed token
//   sampler_history_ids      I32 [K]  the sampler's penalty history: ascending ids ...
//   sampler_history_weights  F32 [K]  ... and their weights (K may be 0)
// with the metadata `sampler_mode` ("standard" / "chatrwkv") and `sampler_rng` (the SplitMix64
// state, 16 hex digits) whenever the history tensors are present.
// (B = 1 keeps the layout of the batched document-index files.) String metadata: `wick.state` =
// "2" (format id and version; files of version "1", without the format-2 parts, still read), `kind`
// = "snapshot", `n_layer`, `n_embd`, `n_head`, `head_size`, `base_fingerprint`
// (ModelInfo::fingerprint of the model that produced the state), `contract` (JSON object:
// `tokenizer`, `n_tokens`, optional `prompt_sha256`), `note` (free text), `engine_version`.
//
// The round trip is bit-exact: every float is stored as computed and read back unchanged.
// Thread-safety: free functions without shared state; the usual rules for State apply.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wick/continuation.h"
#include "wick/model.h"
#include "wick/state.h"

namespace wick {

// What a state file says about the state besides its numbers.
struct StateFileInfo {
  std::string note;           // free user text
  std::string tokenizer;      // tokenizer the tokens were encoded with (e.g. vocabulary file name)
  int64_t n_tokens = -1;      // tokens the state has absorbed; -1 = unknown
  std::string prompt_sha256;  // optional: SHA-256 (hex) of the text folded in
  std::string base_fingerprint;  // filled by save_state() from the model; read back by load_state()
  std::string engine_version;    // filled by save_state(); read back by load_state()
  // Format 2: the logits after the last absorbed token and the sampler of the generation that
  // produced the state, when known (save_state() writes the parts that are set; load_state()
  // fills what the file holds: nothing for a format-1 file).
  Continuation continuation;
};

// Writes `state` (of `model`) to `path` atomically (temporary file, then rename).
// Throws InputError when the state does not belong to the model's geometry or the continuation's
// logits are not [V] or its sampler snapshot is malformed, FileError when the file cannot be
// written.
void save_state(const std::string& path, const State& state, const Model& model,
                const StateFileInfo& info = {});

// The bytes save_state() would write (for a state kept in memory or sent over a network).
// Throws as save_state() does, without FileError.
std::string serialize_state(const State& state, const Model& model, const StateFileInfo& info = {});

struct LoadedState {
  State state;
  StateFileInfo info;
  std::vector<std::string> warnings;  // e.g. the fingerprint mismatch accepted by allow_other_base
};

// Reads a state file for `model`. A state saved by a model of another geometry is always refused;
// one saved by other weights (different base_fingerprint, or none) is refused unless
// `allow_other_base`, which loads it with a warning.
// Throws FileError (cannot read), FormatError (not a valid safetensors file: truncated, lying
// header) and StateFileError (no `wick.state` key, unknown version or kind, missing, extra or
// misshapen tensors, non-finite values, logits of another vocabulary size, a malformed sampler
// part, geometry or fingerprint mismatch).
LoadedState load_state(const std::string& path, const Model& model, bool allow_other_base = false);

// load_state() of a state file held in memory (`bytes`, e.g. read from a cache server; `name`
// stands for the path in messages), with the same checks, as for any untrusted file. The result
// does not refer to `bytes`. Throws FormatError and StateFileError as load_state() does.
LoadedState parse_state(std::string_view bytes, const std::string& name, const Model& model,
                        bool allow_other_base = false);

}  // namespace wick
