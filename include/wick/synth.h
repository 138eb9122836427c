// Synthetic RWKV-7 x070 checkpoints: deterministic random weights with the real geometry of each
// released model size, for benchmarks and for trying wick without downloading a model. The
// weights are random (initialised to resemble a trained model's statistics, see
// src/synth/synth.cpp): the model runs at the speed and memory of the real one and stays
// numerically sane over long contexts, but the text it produces is meaningless.
//
// File: a safetensors file with the official BlinkDL names and shapes (docs/x070-math.md §1.2,
// rwkvq-format.md §1.6): `emb.weight` [V, C]; `blocks.0.ln0.weight/.bias` [C]; per block i
// `ln1/ln2.weight/.bias` [C], `att.x_r/x_w/x_k/x_v/x_a/x_g`, `att.w0/a0/v0`, `att.k_k/k_a` [1,1,C],
// `att.w1` [C, Dw], `att.w2` [Dw, C] (likewise a1/a2 with Da, v1/v2 with Dv, g1/g2 with Dg),
// `att.r_k` [H, N], `att.receptance/key/value/output.weight` [C, C], `att.ln_x.weight/.bias` [C],
// `ffn.x_k` [1,1,C], `ffn.key.weight` [F, C], `ffn.value.weight` [C, F]; then `ln_out.weight/.bias`
// [C] and `head.weight` [V, C]. Like released checkpoints, block 0 carries `att.v0/v1/v2` too
// (unused by the model). Every tensor has the requested dtype. Metadata: "wick.synth" = "1",
// "wick.synth.geometry", "wick.synth.dtype", "wick.synth.seed", "wick.synth.note".
//
// Determinism: the file is a pure function of (geometry, dtype, seed): the same arguments give a
// byte-identical file (the noise uses integer arithmetic only and does not depend on chunking or
// threads; the per-channel shapes use std::pow, so another libm could differ in a last bit); a
// different seed gives different weights. Element e of tensor `name` is drawn from the e-th output
// of a wick::SplitMix64 stream keyed by (seed, name).
//
// Thread-safety: all functions are reentrant; concurrent calls need distinct output paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "wick/dtype.h"
#include "wick/model.h"

namespace wick {

// Head size of every synthetic model (as in all released RWKV-7 models).
inline constexpr int kSynthHeadSize = 64;
// Default vocabulary (the World vocabulary of the released models).
inline constexpr int kSynthDefaultVocab = 65536;
// Limits of a custom geometry.
inline constexpr int kSynthMaxLayers = 1024;
inline constexpr int kSynthMaxEmbd = 32768;
inline constexpr int kSynthMaxVocab = 1 << 24;

struct SynthGeometry {
  // "0.1b", "0.4b", "1.5b", "2.9b" for the named sizes, else "L:C:V" (e.g. "2:128:512").
  std::string label;
  // The dimensions, exactly as Model::load() will report them for the written file:
  // H = C / 64, N = 64, F = 4C, LoRA ranks from synth_lora_rank(). (With one layer, lora_v is 0
  // as the loader reports it, since the value-residual branch is unused in block 0; block 0's
  // v1/v2 tensors still have rank synth_lora_rank(C, 1.3, 0.5).)
  Geometry geometry;
};

// The LoRA rank rule of the official RWKV-7 training code: max(32, round(k * C^e / 32) * 32),
// rounding half to even like Python's round(). (k, e) = (1.8, 0.5) for the decay and
// in-context-rate branches, (1.3, 0.5) for the value residual, (0.6, 0.8) for the gate.
int synth_lora_rank(int n_embd, double k, double e);

// The geometry of L layers of width C (a positive multiple of 64) and vocabulary V; with n_attn
// > 0 an RWKV-X hybrid (docs/rwkvx.md): n_attn attention blocks with FFN width 4C, the x070 part
// named `rwkv.*`, the attention blocks `moba.{j}.*` (ln1/ln2 weight and bias, att.receptance/key/
// value/output.weight [C, C], ffn.x_k, ffn.key/value.weight), label "L:C:V+Na".
// Throws InputError when L is outside [1, kSynthMaxLayers], C outside [64, kSynthMaxEmbd] or not a
// multiple of 64, V outside [1, kSynthMaxVocab], or L is not a multiple of n_attn.
SynthGeometry make_synth_geometry(int n_layer, int n_embd, int vocab = kSynthDefaultVocab,
                                  int n_attn = 0);

// Parses a geometry: a released size, "0.1b" (L 12, C 768), "0.4b" (L 24, C 1024), "1.5b"
// (L 24, C 2048) or "2.9b" (L 32, C 2560), or an RWKV-X size "rwkvx-0.2b" (L 12, C 768, 4
// attention blocks) or "rwkvx-3.6b" (L 32, C 2560, 8), all with vocabulary 65536
// (case-insensitive); or a custom "L:C" / "L:C:V" (decimal integers, V defaults to 65536). Throws
// InputError naming the expected forms and what was found, or the limit broken (as
// make_synth_geometry).
SynthGeometry parse_synth_geometry(std::string_view spec);

// Parses "bf16", "fp16" or "fp32" (case-insensitive; "f16"/"f32" and "float16"/"float32"
// accepted too). Throws InputError otherwise.
DType parse_synth_dtype(std::string_view name);
// "bf16", "fp16" or "fp32".
std::string_view synth_dtype_name(DType dtype);

struct SynthSummary {
  uint64_t tensors = 0;     // tensors in the file
  uint64_t parameters = 0;  // elements of all tensors (block 0's unused v0/v1/v2 included)
  uint64_t file_bytes = 0;  // size of the written file
};

// Writes the synthetic checkpoint of `geometry` (from parse_synth_geometry/make_synth_geometry)
// in `dtype` (F32, F16 or BF16) with `seed` to `path`, atomically (a temporary file in the same
// folder renamed over `path`; an existing file is replaced). Streams: memory use stays about
// `chunk_bytes` whatever the size (2.9b is 5.9 GB in bf16, 11.8 GB in fp32; measured peak RSS of
// `wick synth` about 15 MB). Uses OpenMP threads to generate the values. `chunk_bytes` is how
// much tensor data is generated and written at a time (the bytes written never depend on it).
// Returns what was written. Throws InputError for another dtype or a geometry that is not one
// make_synth_geometry() would return, and FileError when the file cannot be written (the
// temporary file is removed, `path` is left as it was).
SynthSummary write_synthetic_checkpoint(const std::string& path, const SynthGeometry& geometry,
                                        DType dtype, uint64_t seed = 0,
                                        size_t chunk_bytes = size_t{8} << 20);

// A random reranker head in rwkv-metal's layout (docs/tasks.md §5.4: `probe`, `ln0.*`,
// `ln_out.*`, `blocks.{i}.tmix.*` / `cmix.*` with nn.Linear LoRA factors, `score_fc1/2`) for a
// synthetic base of geometry `base` (head size 64): `n_blocks` x070 blocks initialised as
// write_synthetic_checkpoint initialises blocks, `probe` [1, C], a score MLP with hidden width C
// (fc2 not zero, so scores differ), and the metadata of a real head (format marker, layer_idx =
// `layer` for every block, base geometry). For benchmarks: the scores mean nothing. Deterministic
// in (base, n_blocks, layer, seed). Throws InputError (n_blocks < 1, layer outside the base, a base
// whose head size is not 64) and FileError (cannot write).
void write_synthetic_reranker_head(const std::string& path, const Geometry& base, int n_blocks,
                                   int layer, uint64_t seed = 0);

}  // namespace wick
