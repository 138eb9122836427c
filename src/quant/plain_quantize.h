// `wick quantize --plain`: a dense RWKV-7 checkpoint -> a `.rwkvq` file with the non-search
// encoders (docs/rwkvq-format.md §1.5, §3.2-3.5), for making large test and benchmark files from
// synthetic models. Not one of rwkv-quant's presets: there is no activation-weighted search here.
//
// Per tensor (source keys and order kept, §1.5 groups):
//   proj (att r/k/v/o), cmix (ffn key/value), head -> the requested layout: sb6@4/5/6
//     (`asym_sb6`, plain) or sym@8/6 (`sym_plain`);
//   emb                     -> sb6@5 with `asym_sb6_search`, as the `compression` preset stores
//                              it when no activation statistics exist;
//   w/a/v LoRA              -> asym@6, block 64 (zero-padded last block);
//   g LoRA                  -> rtn@8 (one fp16 scale per stored row);
//   small (k_k, k_a, r_k), LoRA biases (w0, a0, v0), norms, mixes, anything < 2-D -> dense bf16.
// A 2-D tensor of a block-layout group whose columns are not a multiple of 256 falls back to
// rtn@8 (the layout is recorded per tensor, so readers handle the mix); a note says so.
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
#include "quant/rwkvq.h"
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
  std::string group;             // §1.5 group ("other" when none)
  Layout layout = Layout::kDense;
  int bits = 16;
  int gs = 0;                    // block width for sb6 / sym / asym
  std::string mode;              // encoder: asym_sb6, asym_sb6_search, sym_plain, asym, rtn, dense
  std::string note;              // non-empty when the tensor fell back from its group's layout
};

// The plan for `key` of `shape` under `layout` (pure function of its arguments).
TensorPlan plan_tensor(std::string_view key, const std::vector<int64_t>& shape,
                       const PlainLayout& layout);

// Encodes `w` (float32, `shape`, row-major) as `plan` says. Throws InputError when the plan does
// not fit the shape or a quantised tensor holds NaN or infinity.
EncodedTensor encode_planned(const TensorPlan& plan, const float* w,
                             const std::vector<int64_t>& shape);

// The buffers (field, dtype, shape; no bytes) that encode_planned() produces for `shape`.
std::vector<EncodedBuffer> planned_buffers(const TensorPlan& plan,
                                           const std::vector<int64_t>& shape);

struct PlainQuantizeOptions {
  PlainLayout layout;
  std::optional<std::string> tokenizer;  // free-form reference stored in the manifest
};

// Quantises the dense checkpoint at `in` (a .safetensors file, an official .pth, or a folder with
// model.safetensors) into `out` (written atomically). Throws FileError (cannot read / write),
// FormatError (damaged container), CheckpointError (not a dense float checkpoint: an `.rwkvq`,
// integer tensors, no emb.weight or r_k to derive the geometry from, non-finite weights in a
// tensor to quantise), InputError (bad options).
// (wick::quantize_plain in include/wick/quantize.h is the public entry point over this.)
QuantizeSummary quantize_plain(const std::string& in, const std::string& out,
                               const PlainQuantizeOptions& options);

}  // namespace wick::quant
