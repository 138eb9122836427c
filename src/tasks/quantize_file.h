// `wick quantize`: a dense RWKV-7 checkpoint -> a `.rwkvq` file by a QuantConfig
// (docs/rwkvq-format.md §1.5, §3.1-3.5, §3.7): rwkv-quant's presets `reduction` / `compression`,
// a config file, or the plain layouts (`--plain --layout`, for test and benchmark files).
// Planning per tensor follows §1.5: group by key pattern; dense for `other`, < 2-D, LoRA biases
// and 16 bits; bits from the group then the first matching bits override; a group with a block
// width takes the layout of its mode (AW modes weighted by the tensor's E[x^2] when the
// statistics hold its key with the right length, else their unweighted search variant - reported
// as a warning); a group without one is per-row rtn (activation-weighted when statistics exist).
// One deliberate difference: a tensor whose shape does not fit its block layout (columns not a
// multiple of 256, or not 2-D) is stored as rtn@8 with a note instead of failing.
//
// The plain layouts, per tensor (source keys and order kept, §1.5 groups):
//   proj (att r/k/v/o), cmix (ffn key/value), head -> the requested layout: sb6@4/5/6
//     (`asym_sb6`, plain) or sym@8/6 (`sym_plain`);
//   emb                     -> sb6@5 with `asym_sb6_search`, as the `compression` preset stores
//                              it when no activation statistics exist;
//   w/a/v LoRA              -> asym@6, block 64 (zero-padded last block);
//   g LoRA                  -> rtn@8 (one fp16 scale per stored row);
//   small (k_k, k_a, r_k), LoRA biases (w0, a0, v0), norms, mixes, anything < 2-D -> dense bf16.
// A 2-D tensor of a block-layout group whose columns are not a multiple of 256 falls back to
// rtn@8 (the layout is recorded per tensor, so readers handle the mix); a note says so.
// An RWKV-X checkpoint (`rwkv.*` + `moba.{j}.*`) goes through the same groups: its attention
// blocks' att r/k/v/o are proj, their ffn key/value cmix, their norms and ffn.x_k dense; its
// block-count and moba metadata are carried into the file (wick loads it; rwkv-quant does not
// know RWKV-X).
//
// Thread-safety: reentrant; encoders use the global thread pool (one caller at a time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/encode.h"
#include "quant/quant_config.h"
#include "quant/rwkvq.h"
#include "wick/act_stats_file.h"
#include "wick/quantize.h"

namespace wick::quant {

// The layout requested for proj / cmix / head.
struct PlainLayout {
  Layout layout = Layout::kSb6;  // kSb6 or kSym
  int bits = 5;                  // sb6: 4, 5, 6; sym: 6, 8
  std::string label() const;     // "sb6:5", "sym:8"
};

// Parses "sb6:4", "sb6:5", "sb6:6", "sym:8" or "sym:6". Throws InputError otherwise (the message
// lists the accepted values).
PlainLayout parse_plain_layout(std::string_view text);

// The §1.5 group of a key: the first of proj, w_lora, a_lora, v_lora, g_lora, small, cmix, emb,
// head with a pattern p such that the key ends with p or contains p; "other" when none matches.
std::string tensor_group(std::string_view key);

// What plain quantisation does with one tensor.
struct TensorPlan {
  std::string group;  // §1.5 group ("other" when none)
  Layout layout = Layout::kDense;
  int bits = 16;
  int gs = 0;                  // block width for sb6 / sym / asym
  std::string mode;            // encoder actually used: asym_sb6, asym_sb6_search, asym_sb6_aw,
                               // sym_plain, sym, sym_aw, asym, rtn, rtn_aw, dense
  std::string requested_mode;  // the config's mode for the group ("" for dense)
  bool weighted = false;       // encoded with the tensor's activation statistics
  std::string note;            // non-empty when the tensor fell back from its group's layout
};

// The plan for `key` of `shape` under `config`; `act` / `act_len`: the key's E[x^2] vector when
// the statistics have one (else null / 0). Pure function of its arguments.
TensorPlan plan_tensor(std::string_view key, const std::vector<int64_t>& shape,
                       const QuantConfig& config, const float* act, int64_t act_len);
// The plan of the plain layouts (QuantConfig::plain, no statistics).
TensorPlan plan_tensor(std::string_view key, const std::vector<int64_t>& shape,
                       const PlainLayout& layout);

// Encodes `w` (float32, `shape`, row-major) as `plan` says; `act` = the tensor's E[x^2] when
// plan.weighted. Throws InputError when the plan does not fit the shape or a quantised tensor
// holds NaN or infinity.
EncodedTensor encode_planned(const TensorPlan& plan, const float* w,
                             const std::vector<int64_t>& shape, const float* act = nullptr);

// The buffers (field, dtype, shape; no bytes) that encode_planned() produces for `shape`.
std::vector<EncodedBuffer> planned_buffers(const TensorPlan& plan,
                                           const std::vector<int64_t>& shape);

struct PlainQuantizeOptions {
  PlainLayout layout;
  std::optional<std::string> tokenizer;  // free-form reference stored in the manifest
  ProgressFn progress;                   // (tensors encoded, tensors in all) after each tensor
};

// Quantises the dense checkpoint at `in` (a .safetensors file, an official .pth, or a folder with
// model.safetensors) into `out` (written atomically). Throws FileError (cannot read / write),
// FormatError (damaged container), CheckpointError (not a dense float checkpoint: an `.rwkvq`,
// integer tensors, no emb.weight or r_k to derive the geometry from, non-finite weights in a
// tensor to quantise), InputError (bad options).
// (wick::quantize_plain in include/wick/quantize.h is the public entry point over this.)
QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const PlainQuantizeOptions& options);

// Activation statistics: weight key -> E[x^2] per input channel (docs/rwkvq-format.md §3.6),
// read by wick::load_act_stats (include/wick/act_stats_file.h).
using ActStats = wick::ActStats;

struct FileQuantizeOptions {
  QuantConfig config;                    // what to do per group (written to the manifest)
  std::optional<ActStats> stats;         // E[x^2] for the activation-weighted modes
  std::optional<std::string> tokenizer;  // free-form reference stored in the manifest
  std::string label;                     // QuantizeSummary::layout ("preset compression", ...)
  ProgressFn progress;                   // (tensors encoded, tensors in all) after each tensor
};

// Quantises the dense checkpoint at `in` into `out` (atomically) by `options.config`. Throws like
// quantize_plain.
QuantizeSummary quantize_checkpoint(const std::string& in, const std::string& out,
                                    const FileQuantizeOptions& options);

}  // namespace wick::quant
