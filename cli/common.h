// Helpers shared by the subcommands: loading the model (or the embedded default), picking the
// tokenizer, printing errors.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::cli {

// The command's Runtime, shared by every model it loads: set_cli_threads() threads if called
// (before the first use), else WICK_THREADS when set (>= 1), else one per core. WICK_THREADS is a
// CLI default only; the library never reads it.
void set_cli_threads(int threads);
const std::shared_ptr<Runtime>& cli_runtime();
// Model::load on the command's Runtime.
Model open_model(const std::string& path, const LoadOptions& options = {});
// Loads `path`, or the embedded default model when it is empty, with `options` applied, on the
// command's Runtime.
Model load_model_or_default(const std::string& path, const LoadOptions& options = {});
// Adds `--quantize none|int8` (weight quantisation at load, wick/model.h WeightQuantization) and
// `--precision fp32|bf16` (the large products' input precision, wick/model.h Precision) to a
// command that loads a model to run it; the choices are written to `options`.
// Also adds the LoRA flags (add_lora_options) to every command but `serve`.
void add_load_options(CLI::App* cmd, LoadOptions& options);
// `--lora FILE`, `--lora-alpha A`, `--lora-scale S` (wick/lora.h), written to options.lora,
// lora_alpha and lora_scale; the adapter is loaded with the model (Model::load with LoadOptions).
void add_lora_options(CLI::App* cmd, LoadOptions& options);

// RWKV-X attention flags (docs/rwkvx.md §6.5) of the commands that run a model:
// --attention full|moba, --moba-block N, --moba-topk K, --moba-scope shared|per_head,
// --moba-past K|K-1, --kv-max N. Unset values keep the model's defaults.
struct AttentionFlags {
  std::string mode;        // "", "full", "moba"
  int64_t moba_block = 0;  // 0 = the model's
  int moba_topk = 0;       // 0 = the model's
  std::string scope;       // "", "shared", "per_head"
  std::string past;        // "", "K", "K-1"
  int64_t kv_max = -1;     // -1 = no limit given
  bool any() const {
    return !mode.empty() || moba_block || moba_topk || !scope.empty() || !past.empty() ||
           kv_max >= 0;
  }
};
void add_attention_flags(CLI::App* cmd, AttentionFlags* flags);
// `model` running with the flags. Throws InputError when flags are given for a model without
// attention blocks (a plain RWKV-7 model), or for invalid values.
Model with_attention_flags(const Model& model, const AttentionFlags& flags);
// "full", or "moba (B=32, K=2, shared, K past blocks)", plus ", kv-max N" when limited.
std::string describe_attention(const AttentionOptions& o);
// The tokenizer for a model: `path` if given (checked against the model's vocabulary with
// check_tokenizer_fits; with --allow-tokenizer-mismatch a mismatch is a warning on stderr), else
// byte-level for vocabulary 256 and the embedded World vocabulary for 65536.
std::unique_ptr<Tokenizer> tokenizer_for(const Model& model, const std::string& path = "");
// Adds --allow-tokenizer-mismatch to every (sub)command of `app` that has both --tokenizer and
// --model, i.e. every command whose tokenizer goes through tokenizer_for(). Call once, after
// every command is registered.
void add_tokenizer_mismatch_flag(CLI::App& app);
// `path`, or the embedded World vocabulary when empty.
std::unique_ptr<Tokenizer> tokenizer_or_default(const std::string& path);
// The `text` field of every line of a JSON-lines file, in order: item i is line i + 1 (blank
// lines are allowed only at the end). Throws FileError (cannot read) and InputError naming the
// line (a blank line between records, not JSON, not an object, no string `text`, invalid UTF-8).
std::vector<std::string> read_jsonl_texts(const std::string& path);
// Shortest text that reads back to the same float ("null" for NaN/Inf, which JSON cannot hold).
std::string float_json(float f);

}  // namespace wick::cli
