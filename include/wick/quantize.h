// Writing `.rwkvq` files (rwkv-quant's quantised format, docs/rwkvq-format.md) from a dense
// RWKV-7 checkpoint:
//   * quantize(): rwkv-quant's presets (§3.7) - `reduction` (proj/emb/head sym@8, FFN sym@6,
//     `sym_aw`) and `compression` (proj/emb/head sb6@5, FFN sb6@4, `asym_sb6_aw`); w/a/v LoRA
//     asym@6 (block 64), g LoRA rtn@8, the rest dense bf16 - or a config file (§1.3.2, as
//     `wick calibrate` writes it). The activation-weighted (AW) modes weight each tensor's scale
//     search by E[x^2] of its input (an act-stats file, §3.6); without statistics they run as
//     their unweighted search and the summary says so in `warnings` (rwkv-quant switches
//     silently).
//   * quantize_plain(): one plain (no-search) layout for the projections, FFN and head (sb6:4/5/6
//     `asym_sb6`, sym:8/6 `sym_plain`); emb sb6@5 search; LoRA as above. For test and benchmark
//     files.
//
// Thread-safety: reentrant; the encoders use the global kernel thread pool.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wick/progress.h"

namespace wick {

struct QuantizeSummary {
  int64_t tensors = 0;
  std::map<std::string, int64_t> tensors_per_layout;  // "sb6@5", "asym@6", "dense bf16", ...
  uint64_t file_bytes = 0;
  std::string layout;                 // what was asked: "sb6:5", "preset compression", "config F"
  std::string naming;                 // manifest naming: "world" or "custom"
  int64_t layout_weights = 0;         // weights of the proj/cmix/head tensors
  uint64_t layout_bytes = 0;          // their stored bytes (codes and scales)
  std::vector<std::string> notes;     // one per tensor that fell back to another layout
  std::vector<std::string> warnings;  // AW modes run unweighted (no statistics), ignored stats
  std::string config_repr;            // "QuantConfig(proj=5, ..., emb_head=5)"
  int64_t weighted_tensors = 0;       // tensors encoded with activation statistics

  double layout_bits_per_weight() const {
    return layout_weights
               ? 8.0 * static_cast<double>(layout_bytes) / static_cast<double>(layout_weights)
               : 0.0;
  }
};

// Quantises the dense checkpoint `in` (.safetensors, official .pth, or a folder holding
// model.safetensors) into the `.rwkvq` file `out` (written atomically) with the plain encoders;
// `layout` is "sb6:4", "sb6:5", "sb6:6", "sym:8" or "sym:6"; `tokenizer` is a free-form
// reference stored in the manifest (null when absent). Throws InputError (unknown layout),
// FileError, FormatError (damaged container) and CheckpointError (not a dense float RWKV-7
// checkpoint, already an .rwkvq, non-finite weights in a tensor to quantise).
QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const std::string& layout,
                               const std::optional<std::string>& tokenizer = std::nullopt,
                               const ProgressFn& progress = {});

struct QuantizeOptions {
  std::string preset;          // "reduction" (default when both are empty) or "compression"
  std::string config_path;     // a JSON config (§1.3.2; a whole manifest works too), else ""
  std::string act_stats_path;  // safetensors E[x^2] per input channel (wick act-stats), else ""
  std::optional<std::string> tokenizer;  // free-form reference stored in the manifest
  // Called after each tensor is encoded with (tensors done, tensors in all); may be empty.
  ProgressFn progress;
};

// Quantises `in` into `out` (atomically) with a preset or a config file. Throws InputError
// (unknown preset, both preset and config, a config that does not parse or names a layout that
// does not exist, SpQR outliers requested), FileError, FormatError (damaged checkpoint or stats
// file) and CheckpointError (as quantize_plain).
QuantizeSummary quantize(const std::string& in, const std::string& out,
                         const QuantizeOptions& options);

}  // namespace wick
