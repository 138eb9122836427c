// Activation statistics as data: the E[x^2] vectors per weight key, and their file
// (docs/rwkvq-format.md §3.6). What the quantiser reads; collecting them from a model is
// wick/act_stats.h.
//
// File (safetensors): one F32 tensor of shape [IN] per key, in byte-wise name order (the order of
// ActStats, and the order the safetensors library writes - the same as rwkv-quant's fixture
// tiny_act_stats.safetensors); string metadata
//   format = "wick-act-stats-v1", model_fingerprint = ModelInfo::fingerprint of the model,
//   tokens, windows, ctx (decimal integers; ctx = 0 when the windows differ in length),
//   description (free text).
// rwkv-quant keeps the same dictionary as a torch.save pickle; this is its safetensors form.
//
// Thread-safety: the functions keep no state between calls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wick {

// Weight key (world name) -> E[x^2] per input channel, float32 [IN]; keys in byte-wise order.
using ActStats = std::map<std::string, std::vector<float>>;

// The value of the `format` metadata of the files save_act_stats() writes.
inline constexpr const char* kActStatsFormat = "wick-act-stats-v1";

struct ActStatsResult {
  ActStats stats;
  int64_t tokens = 0;   // tokens fed, each contributing one row to every key: sum of (T - 1)
  int64_t windows = 0;  // windows fed
  int64_t ctx = 0;      // tokens per window (T) when all windows have the same length, else 0
  std::string model_fingerprint;  // ModelInfo::fingerprint of the model the stats come from
};

// Writes `result` to `path` as the safetensors file described above, atomically (temporary file
// in the same folder, renamed over `path`). The float values round-trip bit-exactly through
// load_act_stats(). Throws InputError when result.stats is empty or a vector is empty, and
// FileError when the file cannot be written.
void save_act_stats(const std::string& path, const ActStatsResult& result);

// Reads activation statistics from a safetensors file: ours, or any file of F32 [IN] vectors
// keyed by weight names (rwkv-quant's fixture). When `metadata` is given it receives the file's
// string metadata (empty when it has none). The key names are not checked: the quantiser looks
// the keys it needs up and treats a missing key or a length != IN as "no statistics".
// Throws FileError (cannot read), FormatError naming the file (and the tensor where there is
// one) for a damaged safetensors container, a file that is not safetensors (e.g. rwkv-quant's
// torch.save .pt), no tensor at all, a tensor that is not F32, not 1-D or empty, a value that is
// negative, NaN or infinite, or a `format` metadata "wick-act-stats-vN" of a version this wick
// does not read (any other `format` value, e.g. "pt", is ignored).
ActStats load_act_stats(const std::string& path,
                        std::map<std::string, std::string>* metadata = nullptr);

}  // namespace wick
