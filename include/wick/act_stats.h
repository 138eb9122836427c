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
// File: the statistics and their safetensors form are wick/act_stats_file.h.
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

#include "wick/act_stats_file.h"
#include "wick/model.h"
#include "wick/perplexity.h"
#include "wick/tokenizer.h"

namespace wick {

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

}  // namespace wick
