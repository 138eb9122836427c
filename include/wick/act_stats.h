// Activation statistics: E[x^2] per input channel of every weight matrix the quantiser can weight
// by activations (docs/rwkvq-format.md §3.6), collected over windows of a text.
//
// What is recorded. For each weight key (world names, docs/naming.md, whatever convention the
// model was loaded from) the mean over all fed tokens of the squared input activation of that
// matrix product, per input channel:
//   E[x^2][c] = (sum over windows w, positions t of x_{w,t}[c]^2) / tokens
// with the inputs of docs/rwkvq-format.md §5 (Model's trace names "in.*", wick/model.h):
//   blocks.i.att.receptance.weight  <- xr, the ln1 output token-shift-mixed with x_r   [C]
//   blocks.i.att.key.weight         <- xk                                             [C]
//   blocks.i.att.value.weight       <- xv                                             [C]
//   blocks.i.att.output.weight      <- (GroupNorm(wkv out) + bonus) * gate            [C]
//   blocks.i.ffn.key.weight         <- the ln2 output token-shift-mixed with ffn.x_k  [C]
//   blocks.i.ffn.value.weight       <- relu(ffn.key x)^2                              [F]
//   head.weight                     <- the ln_out output                              [C]
// Nothing for emb.weight (a gather) or any LoRA factor. The squares are summed in double and
// divided once at the end; the result is stored as float32. The values are >= 0 (finite for a
// sound model).
//
// Protocol. The windows are those of the perplexity protocol (wick/perplexity.h, cut_windows():
// consecutive non-overlapping windows of ctx tokens from token 0, partial tail dropped, optional
// max_windows), and each window is fed exactly as perplexity feeds it: its first T - 1 tokens, in
// one parallel pass from a zero state (nothing carried over between windows). So `tokens` = sum
// over windows of (T - 1) - the same convention as rwkv-quant's collector, which feeds its
// 128-token calibration rows as 127-token windows. The statistics come from whatever model is
// given, in wick's fp32 forward pass: rwkv-quant collects them on the dense (bf16) model, so pass
// the dense checkpoint when the stats are meant for quantising it.
//
// File (safetensors): one F32 tensor of shape [IN] per key, in byte-wise name order (the order of
// ActStats, and the order the safetensors library writes - the same as rwkv-quant's fixture
// tiny_act_stats.safetensors); string metadata
//   format = "wick-act-stats-v1", model_fingerprint = ModelInfo::fingerprint of the model,
//   tokens, windows, ctx (decimal integers; ctx = 0 when the windows differ in length),
//   description (free text).
// rwkv-quant keeps the same dictionary as a torch.save pickle; this is its safetensors form.
//
// Thread-safety: the functions keep no state between calls and only read the Model and
// Tokenizer; collect_act_stats() runs Model::forward(), so concurrent calls follow the rules of
// concurrent forward() calls (wick/model.h).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/model.h"
#include "wick/perplexity.h"
#include "wick/tokenizer.h"

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

// The keys collect_act_stats() records for `model`, in the model's order: for each block i,
// blocks.i.att.{receptance,key,value,output}.weight, blocks.i.ffn.{key,value}.weight; then
// head.weight. 6 L + 1 keys.
std::vector<std::string> act_stats_keys(const Model& model);

// E[x^2] of every key of act_stats_keys() over pre-cut windows (each of >= 2 tokens, fed as
// described above; the windows of cut_windows() or a pre-tokenised corpus). `progress` is called
// after each window (wick/perplexity.h WindowProgress).
// Throws InputError for a model without an LM head (an embedding backbone: there is no
// head.weight to record), no window, a window of fewer than 2 tokens or a token id outside
// [0, V) (every token is checked, the unfed last one included).
ActStatsResult collect_act_stats(const Model& model, std::span<const std::vector<int32_t>> windows,
                                 const WindowProgress& progress = {});

// Tokenises `text` once with `tokenizer`, cuts it with cut_windows(ids, options) and runs the
// function above; the result's ctx is options.ctx. Throws what those throw (InputError: ctx < 2,
// max_windows < 0, a text shorter than one window, text the tokenizer refuses).
ActStatsResult collect_act_stats(const Model& model, const Tokenizer& tokenizer,
                                 std::string_view text, const WindowOptions& options,
                                 const WindowProgress& progress = {});

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
