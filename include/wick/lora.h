// LoRA adapters (docs/tasks.md §8; issue 23): a low-rank change of the large projections of
// an RWKV-7 x070 model, y = x·Wᵀ + scale·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r] and
// scale = alpha / r · lora_scale, applied at run time (Model::with_adapter, or per sequence in the
// batched passes) or merged into a dense checkpoint (merge_lora).
//
// Files: a safetensors file or a PyTorch .pth (zip), with the names of either trainer:
//   RWKV-PEFT:  blocks.{i}.att.{receptance,key,value,output}.lora_A [r, in] / .lora_B [out, r],
//               blocks.{i}.ffn.{key,value}.lora_A / .lora_B;
//   rwkv-metal: blocks.{i}.tmix.{r_proj,k_proj,v_proj,o_proj}.lora_a / .lora_b,
//               blocks.{i}.cmix.{key,value}.lora_a / .lora_b
// (fla names, model.layers.{i}.attn.r_proj.lora_A ..., are read too; a `module.` prefix is
// ignored). Every pair has the same rank r. Elements fp32, fp16 or bf16; the factors are kept in
// fp32. Full tensors in the file that name a LayerNorm / GroupNorm of the base model (ln0, ln1,
// ln2, att.ln_x, ln_out; weight or bias, any naming) replace the base tensor (same shape). Other
// full tensors are refused (merge them yourself; run-time replacement is for the norms only).
//
// alpha: upstream files do not store it. A file written by wick carries the safetensors metadata
// `wick.lora` = "1", `lora_alpha` (decimal) and `lora_rank` (decimal, = r); the caller's alpha
// (LoraOptions::alpha) is then optional and must agree with the file's. Without `lora_alpha` the
// caller must give alpha: there is no default.
//
// Refused by name: PiSSA adapters (tensors `init_lora_A`/`init_lora_B`, or a file named *pissa*:
// they need RWKV-PEFT's init_pissa.pth, W ← W − B₀A₀ + BA) and DiSHA ("bone"/"bat": tensors
// named `disha`, `bone` or `bat`), which are merge-only formats wick does not implement.
//
// Cost at run time: r·(in + out) extra multiply-adds per row and adapted matrix, computed by the
// same matrix kernels as the dense fp32 weights, so the parallel pass and the recurrent step (and
// every row of a batched pass) stay bit-identical to each other.
//
// Thread-safety: a LoraAdapter is immutable after load(); share it (std::shared_ptr) between any
// number of Models, threads and batched passes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wick/model.h"

namespace wick {

struct LoraOptions {
  // alpha of the training run (RWKV-PEFT --lora_alpha). Required unless the file carries wick's
  // `lora_alpha` metadata; when both are given they must be equal. Finite and > 0.
  std::optional<double> alpha;
  // Extra multiplier (`--lora-scale`): scale = alpha / r · this. Finite; 1 = as trained. It
  // multiplies the low-rank term only: at 0 the term vanishes but the file's replacement norms
  // still apply (norm replacement is all or nothing; to run without the adapter, load none).
  double scale = 1.0;
};

class LoraAdapter {
 public:
  struct Impl;

  // Reads the adapter at `path` for models of `base`'s geometry. Nothing in the file is trusted:
  // every name is mapped through the model's tensor table and every shape checked against `base`.
  // Throws FileError (cannot read), FormatError / UnsafePickleError (damaged container) and
  // CheckpointError naming the tensor, what was expected and what was found, for: a PiSSA or DiSHA
  // adapter; an unknown tensor or target (a name that is neither a factor of the six adapted
  // matrices nor a norm of the model); a layer index outside the model; a factor without its
  // partner, or given twice; a shape other than A [r, in] / B [out, r]; A and B (or two pairs) of
  // different ranks; a `lora_rank` that is not r; a replacement norm of the wrong shape; a dtype
  // other than fp32/fp16/bf16; a NaN or infinite element; a file with no factors and no norms; an
  // RWKV-X base (not supported). Throws InputError when alpha is missing (no `lora_alpha` in the
  // file and none given), contradicts the file's `lora_alpha`, or alpha or scale is not finite
  // (alpha also when <= 0).
  static std::shared_ptr<const LoraAdapter> load(const std::string& path, const Model& base,
                                                 const LoraOptions& options = {});

  // The same adapter with another LoraOptions::scale (a request's `lora` scale in the server):
  // shares the factors and norms (no copy; cheap), computes with scale = alpha / r · lora_scale,
  // and has its own fingerprint (equal to this one's when the applied float scale is equal).
  // Throws InputError when lora_scale is not finite.
  std::shared_ptr<const LoraAdapter> with_scale(double lora_scale) const;

  const std::string& source() const;  // the path given to load()
  int rank() const;                   // r
  double alpha() const;               // the alpha in use (the caller's or the file's)
  double lora_scale() const;          // LoraOptions::scale
  double scale() const;               // alpha / r · lora_scale: the multiplier of B·A
  // Official names (docs/naming.md) of the adapted matrices ("blocks.0.att.key.weight", ...) and
  // of the base tensors the file replaces ("blocks.0.ln1.weight", ...), in table order.
  const std::vector<std::string>& adapted() const;
  const std::vector<std::string>& replaced() const;
  // Parameters held (factors + replacement norms) and their bytes in memory (fp32).
  uint64_t parameters() const;
  uint64_t bytes() const;
  // "sha256:<64 hex>" over the adapter's content as used (names and fp32 values, which fix the
  // shapes) and its scale as applied (float): part of the fingerprint of a Model running with it
  // (ModelInfo::fingerprint).
  const std::string& fingerprint() const;
  // The geometry the adapter was checked against.
  const Geometry& geometry() const;
  // "adapter.safetensors (rank 8, alpha 16, scale 2, 24 matrices, 10 norms replaced)".
  std::string describe() const;

  const Impl& impl() const { return *impl_; }  // internal (libwick)
  explicit LoraAdapter(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const Impl> impl_;
};

// What merge_lora() wrote.
struct LoraMergeSummary {
  uint64_t tensors = 0;     // tensors in the output file
  uint64_t merged = 0;      // matrices changed by W += scale·B·A
  uint64_t replaced = 0;    // tensors replaced by the adapter's full tensors
  uint64_t file_bytes = 0;  // size of the written file
};

// Writes the dense checkpoint `base_path` with `adapter` merged to `out_path` (safetensors,
// atomically: a temporary file renamed over it): each adapted matrix becomes
// W + scale·(B·A), computed in fp32 per element (sum over r in order, then one fp32 add to the
// widened weight) and stored back in the matrix's own dtype (round to nearest even for fp16 /
// bf16); the replaced norms are written in the base tensor's dtype and shape; every other tensor
// is copied byte for byte, under its stored name (the base's naming convention is kept). The
// base's safetensors metadata is kept, plus `wick.lora_merged` = adapter.describe().
// Throws like Model::load for the base; CheckpointError when the base is a packed .rwkvq
// (merging needs dense weights: merge into the dense checkpoint, then quantise), lacks a tensor
// the adapter adapts or replaces, or stores one in another dtype than fp32/fp16/bf16; InputError
// when the adapter was loaded for another geometry; FileError when the output cannot be written
// (`out_path` is left as it was).
LoraMergeSummary merge_lora(const std::string& base_path, const LoraAdapter& adapter,
                            const std::string& out_path);

}  // namespace wick
