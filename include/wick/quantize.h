// Writing `.rwkvq` files (rwkv-quant's quantised format, docs/rwkvq-format.md) from a dense
// RWKV-7 checkpoint. Only the plain mode exists so far: the r/k/v/o projections, FFN key/value
// and head take one layout (sb6:4, sb6:5, sb6:6 with the plain `asym_sb6` encoder, or sym:8,
// sym:6 with `sym_plain`); the embedding is sb6@5 with the unweighted search (as rwkv-quant's
// `compression` preset stores it without activation statistics), the w/a/v LoRA asym@6 (block
// 64), the g LoRA rtn@8, everything else dense bf16. Meant for test and benchmark files; the
// presets with activation-weighted search (`reduction`, `compression`) are not implemented.
//
// Thread-safety: reentrant; the encoders use the global kernel thread pool (one caller at a
// time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace wick {

struct QuantizeSummary {
  int64_t tensors = 0;
  std::map<std::string, int64_t> tensors_per_layout;  // "sb6@5", "asym@6", "dense bf16", ...
  uint64_t file_bytes = 0;
  std::string layout;          // the requested layout, "sb6:5"
  std::string naming;          // manifest naming: "world" or "custom"
  int64_t layout_weights = 0;  // weights of the proj/cmix/head tensors stored in that layout
  uint64_t layout_bytes = 0;   // their stored bytes (codes and scales)
  std::vector<std::string> notes;  // one per tensor that fell back to another layout

  double layout_bits_per_weight() const {
    return layout_weights ? 8.0 * static_cast<double>(layout_bytes) /
                                static_cast<double>(layout_weights)
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
                               const std::optional<std::string>& tokenizer = std::nullopt);

}  // namespace wick
