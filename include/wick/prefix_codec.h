// Cached prefixes as bytes, for a cache tier shared between processes (the replicas' Redis tier,
// README "Scaling out"). A value holds everything a CachedPrefix holds, and nothing is trusted on
// the way back: a value read from a shared store may be damaged, truncated, written by another
// model or by a replica started with other settings.
//
// Layout (all integers little-endian):
//   8 bytes   magic "WICKPFX2" (format and version)
//   u32 S     scope length (<= 65536), then S bytes: the cache scope (wick/prefix_cache.h)
//   u32 n     token ids absorbed (1 <= n <= 2^28), then n x i32: the ids
//   u64 F     then F bytes, the rest of the value: a wick state file of format 2
//             (wick/state_file.h) whose contract says n_tokens = n, whose base_fingerprint is the
//             model's, and which carries the logits of the last position (and no sampler)
//
// Thread-safety: free functions without shared state.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "wick/model.h"
#include "wick/prefix_cache.h"

namespace wick {

// The bytes of `entry` (a state of `model`). Throws InputError when the entry is empty or its
// state or logits do not fit the model.
std::string encode_cached_prefix(const CachedPrefix& entry, const Model& model);

// Reads a value written by encode_cached_prefix() for `model`, as an untrusted file: the magic,
// every size against the bytes present, the scope (must equal `scope`), the ids (must equal
// `tokens`, the prefix the value was looked up for), the state file (format, geometry, exact
// fingerprint, shapes), its token count, the vocabulary size, and that every number is finite.
// Throws FormatError for a damaged value (bad magic, a size past the bytes present or past its
// bound, a token count other than asked, a state file that is not valid safetensors) and
// StateFileError for a state file that load_state() refuses (non-finite numbers in the state or
// the logits, logits of another vocabulary or missing, misshapen tensors) or a well-formed value
// that does not belong here (another scope, other ids, another model's state, a state whose token
// count disagrees), each saying what was expected and what was found.
CachedPrefix decode_cached_prefix(std::string_view bytes, const Model& model,
                                  std::string_view scope, std::span<const int32_t> tokens);

}  // namespace wick
