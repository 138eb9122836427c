// An RWKV-7 "x070" language model (docs/x070-math.md; reference: BlinkDL/RWKV-LM
// RWKV-v7/rwkv_v7_demo_rnn.py) and its two passes, which compute the same function:
//   * forward(): the parallel pass over a whole token sequence (prefill, scoring) - GEMMs over
//     the T rows, the WKV recurrence looped inside one kernel;
//   * step():    the recurrent step over one token (decode) - GEMVs, constant memory.
// Both read every weight through one weight-access path (model/linear.h), so every task
// (generation, ppl, embedding, reranking) and every weight format share the block arithmetic.
//
// Loading: load_model() accepts a safetensors file, an official BlinkDL `.pth`, or a
// HuggingFace / flash-linear-attention folder (config.json + model.safetensors), in any of the
// three naming conventions of docs/naming.md. The geometry comes from the tensor shapes only.
// Weights stay in their stored dtype (fp32, fp16, bf16): the projections, the head and the time
// mix's LoRA factors packed into panels at load (a copy in that layout; the mapped file's pages of
// each are given back, LoadOptions::pack_weights), the vectors and the embedding read from the
// memory-mapped file; computation is fp32, the WKV state fp32.
//
// Runtime: the passes run on the Model's Runtime (wick/runtime.h: worker threads and scratch). A
// loaded Model has a Runtime of its own (default thread count); copies share it; with_runtime()
// gives a Model with these weights on another one.
//
// Thread-safety: a loaded Model is immutable; any number of threads may call forward()/step()
// concurrently, each with its own State. Passes on Models sharing one Runtime take turns (each
// uses all of its threads); Models on different Runtimes run in parallel. Copies of a Model share
// the weights (cheap).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/dtype.h"
#include "wick/geometry.h"
#include "wick/runtime.h"
#include "wick/state.h"

namespace wick {

class LoraAdapter;  // wick/lora.h

// How RWKV-X attention blocks choose the keys a query attends to (docs/rwkvx.md §6.5). Each mode
// is one function of the token sequence: the parallel pass (in one call or in chunks) and the
// recurrent step give the same result.
enum class AttentionMode {
  kFull,  // causal softmax attention over every cached key plus the new ones up to the query
  kMoba,  // block-sparse: the query's own block (causal) plus the top-k complete past blocks,
          // scored by q · mean(keys of the block); one softmax over the union
};
enum class MobaScope {
  kShared,   // one choice for all heads from the C-dimensional q and block-mean keys (package)
  kPerHead,  // each head chooses with its own 64-dimensional q and keys (training-time MoBA)
};
std::string_view attention_mode_name(AttentionMode m);  // "full", "moba"
std::string_view moba_scope_name(MobaScope s);          // "shared", "per_head"

struct AttentionOptions {
  AttentionMode mode = AttentionMode::kFull;
  int64_t moba_block = 2048;  // B: keys per block, counted from position 0
  int moba_topk = 3;          // K
  MobaScope moba_scope = MobaScope::kShared;
  // Past blocks added to the current block: K (false; the package's decode rule) or K - 1
  // (true; training, where K counts the current block).
  bool moba_past_k_minus_1 = false;
  // Most rows a KV cache may hold (0 = no limit). A call that would grow a cache beyond it is
  // refused with ContextFullError before any state changes; nothing is evicted silently.
  int64_t kv_max = 0;
  bool operator==(const AttentionOptions&) const = default;
};

// Quantisation applied to the weights while loading (LoadOptions), on top of how they are stored.
//   kNone: weights are used as stored (fp32 / fp16 / bf16, the projections, head and LoRA factors
//          packed into panels unless LoadOptions::pack_weights is false, or the packed codes of a
//          .rwkvq file).
//   kInt8: per-row symmetric INT8 at load: for each row of a covered matrix, scale = max|row| / 127
//          and code = round-half-to-even(w / scale) clamped to [-127, 127] (an all-zero row: scale
//          0, codes 0). Covered: per block the r/k/v/o projections and the FFN key / value (the
//          RWKV-X attention blocks' q/k/v/o and FFN too), and the head; the embedding, the LoRA
//          branches and every vector stay as stored. Each matrix product quantises its input row
//          the same way (max|x| / 127, one scale per row) and sums code_w * code_x exactly in
//          int32: y[o] = scale_w[o] * scale_x * sum (AVX-512 VNNI, AVX2 or scalar kernels,
//          identical results). Rows of forward() stay bit-identical to step(). The codes + scales
//          live in memory (about one byte per weight), the dense matrices are no longer read.
//          Logits differ from the dense model's (KL on the tiny fixture model: README, "INT8
//          weights at load").
enum class WeightQuantization { kNone, kInt8 };

// The ModelInfo::packed_parameters entry of weights quantised with WeightQuantization::kInt8.
inline constexpr std::string_view kInt8LayoutName = "int8 (per-row)";

// "none" / "int8" (the values of `--quantize`).
std::string_view weight_quantization_name(WeightQuantization q);

// Precision of the activations entering the large matrix products (issue 5; docs/x070-math.md
// leaves the matmul input precision to the engine).
//   kFp32 (default): every product takes fp32 inputs - the exact path the parity tests check
//          against the reference fixtures.
//   kBf16: the input rows of the large products (per block r/k/v/o and FFN key/value, the RWKV-X
//          attention blocks' q/k/v/o and FFN, and the head) are rounded to bf16 (round to nearest
//          even, NaN -> 0x7fc0) before the product; the weights, the LoRA branches, the WKV state,
//          the norms and every accumulation stay as in kFp32. Each product of a bf16 row with a
//          bf16 or fp16 weight is exact in fp32, so the only change is the rounding of the inputs
//          (README "Dense speed", `--precision bf16`: its perplexity cost). forward() rows stay
//          bit-identical to step().
//          On CPUs with AVX-512 BF16 this is the form a bf16 dot product needs; wick's kernels
//          (AVX2 / AVX-512F / scalar) compute it with fp32 FMAs, so today it only adds the
//          rounding (slightly slower; use kFp32 unless matching a bf16 engine's numbers).
//   kInt8: the input rows of the same large products are rounded to 8 bits per superblock of 256
//          columns (scale = max|x| / 127 per superblock, codes round-half-to-even in
//          [-127, 127]; a superblock holding inf / NaN gives NaN outputs). Products with packed
//          weights (.rwkvq sb6 4/5/6-bit and sym 6/8-bit) then run in integers (vpdpbusd on
//          AVX-512 VNNI, vpmaddubsw on AVX2; docs/rwkvq-format.md §2.8) instead of decoding every
//          code to an fp32 weight, which makes their decode step faster (README "`--precision int8`
//          with
//          `.rwkvq` files": speed and KL against kFp32); those products give the same bits on
//          every instruction set. Every other product takes the rounded inputs as floats. The
//          LoRA branches, the WKV state, the norms and the sums stay as in kFp32; forward() rows
//          stay bit-identical to step() and batch rows to single rows.
enum class Precision { kFp32, kBf16, kInt8 };
// Every value, in the order of `--precision`'s help.
inline constexpr Precision kPrecisions[] = {Precision::kFp32, Precision::kBf16, Precision::kInt8};
std::string_view precision_name(Precision p);  // "fp32", "bf16", "int8" (`--precision`)

// How Model::load treats the checkpoint it reads.
struct LoadOptions {
  WeightQuantization quantize = WeightQuantization::kNone;
  Precision precision = Precision::kFp32;  // the Model's precision() (Model::with_precision)
  // Pack the dense projections, the head and the LoRA factors into panels (kernels/panels.h: one
  // fused-multiply-add chain per output; faster prefill, batched and single-row decode) - a copy
  // made while loading, the mapped file's pages of each matrix given back, so the resident weights
  // stay one copy. Loading then reads the whole file and takes longer (README "Weights packed into
  // panels at load"). Matrices stay row-major (read in place) when false, and whatever the flag: a
  // head tied to the embedding, int8 codes and .rwkvq codes, and bf16 weights when `precision` is
  // kBf16 on a CPU with the AVX-512 BF16 dot product, which reads rows. Which matrices are packed
  // is decided here, at load: with_precision(kBf16) on a model loaded at another precision runs the
  // fp32 kernels over its panels (a bf16-precision result, in other bits than a load at kBf16).
  // The two layouts sum in different orders, so their results agree to rounding, not in bits.
  bool pack_weights = true;
  // A LoRA adapter file (wick/lora.h) applied after loading (Model::with_adapter); "" = none.
  // lora_alpha and lora_scale are its LoraOptions. load() then also throws what
  // LoraAdapter::load throws.
  std::string lora;
  std::optional<double> lora_alpha;
  double lora_scale = 1.0;
};

// Facts about a loaded model for `wick info`.
struct ModelInfo {
  std::string source;     // the path given to load(), or "<embedded default model ...>"
  std::string container;  // "safetensors", "pth", "hf-folder", "hf-folder (sharded)",
                          // "safetensors (embedded)"
  NamingConvention convention = NamingConvention::kOfficial;
  uint64_t file_bytes = 0;    // size of the checkpoint file(s) in bytes
  uint64_t parameters = 0;    // number of weights used by the model
  uint64_t weight_bytes = 0;  // bytes of those weights as stored
  std::vector<std::pair<DType, uint64_t>> dtype_parameters;  // parameters per stored dtype
  // .rwkvq: parameters per packed layout ("sb6@5", "sym@8", "asym@6", "rtn@8"); tensors
  // stored dense in the file are counted in dtype_parameters.
  // Loaded with WeightQuantization::kInt8: one entry {kInt8LayoutName, parameters now held as
  // int8 codes}; those parameters leave dtype_parameters (except a head tied to the embedding,
  // whose table is still read as stored: it is counted in both), and weight_bytes counts their
  // codes + fp32 scales + fp32 outlier columns (kernels/int8_matmul.h) instead of the dense bytes.
  std::vector<std::pair<std::string, uint64_t>> packed_parameters;
  // Weight bytes one recurrent step reads: every matrix as held in memory (projections - int8
  // codes + scales with kInt8 - LoRA factors, head) plus one embedding row. Decode roofline =
  // this / memory bandwidth.
  uint64_t bytes_per_token = 0;
  // "sha256:<64 hex>" identifying the weights (docs/tasks.md §3.5): names, dtypes and shapes of
  // every tensor plus the bytes of the small ones. State files carry it to refuse foreign states.
  // With kInt8 it is "sha256:" + SHA-256("wick-int8-per-row-v2", 0x00, the dense fingerprint):
  // the int8 model computes other logits, so a state saved by the dense model is refused unless
  // other bases are allowed (same geometry), and vice versa.
  std::string fingerprint;
  // "x070" (RWKV-7) or "rwkv-x" (RWKV-7 blocks + attention blocks, docs/rwkvx.md).
  std::string architecture = "x070";
  // The quantisation applied at load (LoadOptions::quantize).
  WeightQuantization quantization = WeightQuantization::kNone;
  // Loaded from an EmbeddingRWKV checkpoint (docs/tasks.md §6.3): `rwkv.*` backbone without LM
  // head; its task heads (head.{retr,sts,cls}_head.*) are read by the embedder from the same file.
  bool embedding_rwkv = false;
  // Running with a LoRA adapter (Model::with_adapter): LoraAdapter::describe(), else "". The
  // fingerprint is then "sha256:" + SHA-256("wick-lora-v1", 0x00, the base fingerprint, 0x00,
  // LoraAdapter::fingerprint()) - a state saved with an adapter is refused without it and vice
  // versa - and bytes_per_token includes the adapter's factors. The other fields describe the base.
  std::string adapter;
};

// Hook for inspecting intermediate activations of forward() (tests, debugging, activation
// statistics). Called synchronously, on the thread that called forward(), with a name, the layer
// (-1 outside blocks) and a [rows, cols] fp32 row-major array that is valid only during the call
// (copy what you keep); rows = T (one row per token) and cols = C unless noted:
//   "emb_ln0" (layer -1), and per layer "r", "k" (key after the k_a rescale), "v" (after the value
//   residual), "w_logdecay" (ln(-ln w)), "a" (= -kk), "b" (= kk * a), "wkv_out" (WKV read-out
//   before GroupNorm), "v_first" (layer 0), "att_out", "ffn_out", "block_out".
// Matrix-product inputs - exactly the rows the weight matrix named in brackets (world names,
// docs/naming.md) is applied to (wick/act_stats.h records their E[x^2] per channel):
//   per layer  "in.att.receptance" [att.receptance.weight]: xr, the ln1 output token-shift-mixed
//                                  with x_r;
//              "in.att.key"        [att.key.weight]: xk, the same mix with x_k;
//              "in.att.value"      [att.value.weight]: xv, the same mix with x_v;
//              "in.att.output"     [att.output.weight]: (GroupNorm(wkv_out) + bonus) * gate;
//              "in.ffn.key"        [ffn.key.weight]: the ln2 output token-shift-mixed with
//                                  ffn.x_k;
//              "in.ffn.value"      [ffn.value.weight]: relu(ffn.key x)^2, cols = F (ffn_dim);
//   layer -1   "in.head"           [head.weight]: the ln_out output of the rows whose logits are
//                                  returned: rows = T with all_positions, else 1 (the last).
// RWKV-X attention blocks report, with layer = the attention block's index j:
//   "attn.q" (queries, the ln1 output times att.receptance), "attn.y" (attention output before
//   att.output, heads concatenated), "attn_out" (after att.output), "attn_block_out" (the residual
//   stream after the whole block). Their channel mix is not reported. With "block_out" of the
//   RWKV layers these come in execution order (docs/rwkvx.md §2).
// The LoRA inputs (xw, xa, xg, ...) and the embedding gather are not reported as matrix inputs.
// Each name is reported once per layer and pass, in the order the pass computes them. Without a
// trace nothing is copied or computed for it; with one, the model's arithmetic and results are
// the same (bit for bit).
using ActivationTrace = std::function<void(std::string_view name, int layer, const float* data,
                                           int64_t rows, int64_t cols)>;

class Model {
 public:
  // Loads a checkpoint: a .safetensors file, an official .pth (PyTorch zip), or a folder with
  // config.json + model.safetensors (or model.safetensors.index.json + shards). An fla-named
  // file with a config.json beside it is checked against that config too. The file is
  // memory-mapped; the Model keeps the mapping alive. Throws FileError (cannot read),
  // FormatError / UnsafePickleError (damaged, lying or unsafe container) and CheckpointError (not
  // an x070 model wick understands: unknown or missing tensors, inconsistent shapes, a
  // config.json that contradicts the weights, a GGUF / rwkv.cpp / legacy torch file).
  static Model load(const std::string& path);
  // The same, then the weights are quantised as `options` asks (WeightQuantization above);
  // kNone is load(path). kInt8 quantises at load (rows spread over the kernel threads; ~0.5 s for
  // a 0.1B model) and additionally throws CheckpointError for a .rwkvq file (already quantised:
  // load it with kNone) and for a covered matrix holding a non-finite weight.
  static Model load(const std::string& path, const LoadOptions& options);
  // The tiny trained model embedded in the binary (models/tiny-rwkv7-834K.safetensors, byte-level
  // vocabulary of 256).
  static Model load_default();
  // The embedded model with `options` applied (as load(path, options)).
  static Model load_default(const LoadOptions& options);

  const Geometry& geometry() const;
  const ModelInfo& info() const;

  // RWKV-X attention settings this Model runs with. Defaults: `full`; B and K from the checkpoint's
  // metadata (`moba_chunk_size`, `moba_topk`) when it states them, else 2048 and 3 (docs/rwkvx.md
  // §6.5). Ignored by plain RWKV-7 models.
  const AttentionOptions& attention() const { return attention_; }
  // A Model sharing these weights that runs with other attention settings. Throws InputError for
  // a block size or top-k below 1 (or K - 1 past blocks with K < 1), or a negative kv_max.
  Model with_attention(const AttentionOptions& options) const;

  // The precision of the large matrix products' inputs (Precision above; default kFp32, or
  // LoadOptions::precision).
  Precision precision() const { return precision_; }
  // A Model sharing these weights that runs with another precision (no copy; never throws).
  Model with_precision(Precision precision) const;

  // The LoRA adapter this Model runs with (wick/lora.h), or null.
  const std::shared_ptr<const LoraAdapter>& adapter() const { return adapter_; }
  // A Model sharing these weights (and settings) whose passes add `adapter`'s low-rank terms to
  // the adapted projections and use its replacement norms (the base weights are not changed and
  // stay shared; the adapter is shared too). Null gives the base model without adapter. info()
  // changes as ModelInfo::adapter says. Works on dense, .rwkvq and int8 weights alike; the
  // parallel pass and the recurrent step stay bit-identical. Throws InputError when the adapter
  // was loaded for another geometry.
  Model with_adapter(std::shared_ptr<const LoraAdapter> adapter) const;

  // The Runtime this Model's passes run on (never null).
  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }
  // A Model sharing these weights (and settings) whose passes run on `runtime`. Throws InputError
  // for a null runtime.
  Model with_runtime(std::shared_ptr<Runtime> runtime) const;

  // A zero state of this model's geometry (with empty KV caches for RWKV-X).
  State new_state() const;

  // Parallel pass over tokens[0..T) continuing from `state` (updated to the state after the last
  // token). Returns logits [V] of the last position, or [T, V] row-major with all_positions.
  // Throws InputError for an empty sequence, a token id outside [0, V) or a state of another
  // geometry, and ContextFullError when an RWKV-X KV cache would pass attention().kv_max (the
  // state is then left unchanged).
  std::vector<float> forward(std::span<const int32_t> tokens, State& state,
                             bool all_positions = false,
                             const ActivationTrace* trace = nullptr) const;

  // The same pass writing the logits into `logits` (V floats, or T * V with all_positions; the
  // size must match exactly, else InputError before any state changes). With a caller-owned buffer
  // a steady-state pass allocates nothing.
  void forward(std::span<const int32_t> tokens, State& state, std::span<float> logits,
               bool all_positions = false) const;

  // Recurrent step over one token: logits [V]; `state` advances by one token. Bit-identical to
  // the corresponding row of forward(..., all_positions = true).
  // Throws InputError like forward().
  std::vector<float> step(int32_t token, State& state) const;
  // The same into `logits` [V] (a decode step that allocates nothing once the Runtime is warm).
  void step(int32_t token, State& state, std::span<float> logits) const;

  // Batched parallel pass: sequences[b] continues states[b] (B sequences of any lengths, packed
  // row after row - no padding, so a row never sees its neighbours). Every matrix product runs
  // once over the rows of all sequences (one GEMM); token shift and the WKV recurrence run per
  // sequence from its own state. Returns logits [B, V] row-major: row b is the last position of
  // sequence b, bit-identical to forward(sequences[b], *states[b]).
  // Throws InputError (every state then unchanged) when the counts differ, B == 0, a sequence is
  // empty or has an id outside [0, V), a state is null, of another geometry, or passed twice.
  std::vector<float> forward_batch(std::span<const std::span<const int32_t>> sequences,
                                   std::span<State* const> states) const;
  // The batched pass into `logits`: [B, V] (the last position of each sequence) or, with
  // all_positions, [sum of lengths, V] with the rows of sequence b after those of sequence b-1
  // (each row bit-identical to forward(..., all_positions = true) on that sequence alone). The
  // size must match exactly. Throws like forward_batch().
  void forward_batch(std::span<const std::span<const int32_t>> sequences,
                     std::span<State* const> states, std::span<float> logits,
                     bool all_positions = false) const;

  // Batched recurrent step (decode for B rows at once): tokens[b] advances states[b]. Returns
  // logits [B, V]; row b is bit-identical to step(tokens[b], *states[b]). Throws like
  // forward_batch().
  std::vector<float> step_batch(std::span<const int32_t> tokens,
                                std::span<State* const> states) const;
  // The same into `logits` [B, V].
  void step_batch(std::span<const int32_t> tokens, std::span<State* const> states,
                  std::span<float> logits) const;

  // --- Per-sequence LoRA adapters ----------------------------------------------------------------
  // The batched passes above with one adapter per sequence: adapters[b] (null = none) is used for
  // the rows of sequence b instead of this Model's own adapter(), so rows of different adapters
  // share one batch. Each row is bit-identical to the same call on
  // with_adapter(adapters[b]) with that sequence alone. The pointers are borrowed for the call
  // only. Throws like forward_batch(), and InputError (every state unchanged) when adapters.size()
  // differs from the number of sequences or an adapter was loaded for another geometry.
  void forward_batch(std::span<const std::span<const int32_t>> sequences,
                     std::span<State* const> states, std::span<const LoraAdapter* const> adapters,
                     std::span<float> logits, bool all_positions = false) const;
  void step_batch(std::span<const int32_t> tokens, std::span<State* const> states,
                  std::span<const LoraAdapter* const> adapters, std::span<float> logits) const;
  void absorb_batch(std::span<const std::span<const int32_t>> sequences,
                    std::span<State* const> states,
                    std::span<const LoraAdapter* const> adapters) const;

  // --- The same pass without the LM head (embeddings, reranking) ---------------------------------
  // True when the checkpoint has an LM head (head.weight, or tied embeddings). An EmbeddingRWKV
  // backbone has none: forward()/step() then throw InputError and hidden() is the way to use it.
  bool has_lm_head() const;

  // Hidden states after the final LayerNorm (ln_out), the input of the LM head: [C] of the last
  // position, or [T, C] row-major with all_positions. Same pass, state update and errors as
  // forward(); the LM head is not applied.
  std::vector<float> hidden(std::span<const int32_t> tokens, State& state,
                            bool all_positions = false) const;

  // Batched hidden(): sequences packed without padding as in forward_batch(). Returns [B, C] (the
  // last position of each sequence) or, with all_positions, [sum of lengths, C] with the rows of
  // sequence b following those of sequence b-1. Row values are bit-identical to hidden() on each
  // sequence alone. Throws like forward_batch().
  std::vector<float> hidden_batch(std::span<const std::span<const int32_t>> sequences,
                                  std::span<State* const> states, bool all_positions = false) const;

  // Batched pass that only advances the states (folding a prefix into a state): no ln_out, no
  // head. states[b] ends bit-identical to forward_batch(). Throws like forward_batch().
  void absorb_batch(std::span<const std::span<const int32_t>> sequences,
                    std::span<State* const> states) const;

  struct Impl;
  // Internal (libwick): wraps loaded weights (model/model_impl.h).
  static Model from_impl(std::shared_ptr<const Impl> impl);

 private:
  Model(std::shared_ptr<const Impl> impl, std::shared_ptr<Runtime> runtime);
  std::shared_ptr<const Impl> impl_;
  std::shared_ptr<Runtime> runtime_;
  AttentionOptions attention_;
  Precision precision_ = Precision::kFp32;
  std::shared_ptr<const LoraAdapter> adapter_;
  std::shared_ptr<const ModelInfo> adapted_info_;  // info() with an adapter, else null
};

// Same as Model::load.
inline Model load_model(const std::string& path) {
  return Model::load(path);
}

}  // namespace wick
