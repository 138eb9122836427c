#include "common.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wick/errors.h"

namespace wick::cli {

namespace {
int g_threads = 0;                   // set_cli_threads(); 0: WICK_THREADS or one per core
std::shared_ptr<Runtime> g_runtime;  // created on first use
bool g_allow_tokenizer_mismatch =
    false;  // --allow-tokenizer-mismatch (add_tokenizer_mismatch_flag)
}  // namespace

void set_cli_threads(int threads) {
  g_threads = threads;
}

const std::shared_ptr<Runtime>& cli_runtime() {
  if (!g_runtime) {
    int n = g_threads;
    if (n <= 0)
      if (const char* env = std::getenv("WICK_THREADS")) n = std::atoi(env);
    g_runtime = std::make_shared<Runtime>(n >= 1 ? n : 0);
  }
  return g_runtime;
}

Model open_model(const std::string& path, const LoadOptions& options) {
  return Model::load(path, options).with_runtime(cli_runtime());
}

Model load_model_or_default(const std::string& path, const LoadOptions& options) {
  return path.empty() ? Model::load_default(options).with_runtime(cli_runtime())
                      : open_model(path, options);
}

void add_load_options(CLI::App* cmd, LoadOptions& options) {
  cmd->add_option_function<std::string>(
         "--quantize",
         [&options](const std::string& v) {
           options.quantize = v == "int8" ? WeightQuantization::kInt8 : WeightQuantization::kNone;
         },
         "Quantise the weights at load: none (as stored, default) or int8 (per-row symmetric "
         "INT8 projections, FFN and head; not for .rwkvq files)")
      ->check(CLI::IsMember({std::string(weight_quantization_name(WeightQuantization::kNone)),
                             std::string(weight_quantization_name(WeightQuantization::kInt8))}))
      ->option_text("none|int8");
  std::vector<std::string> precisions;
  for (Precision p : kPrecisions) precisions.emplace_back(precision_name(p));
  cmd->add_option_function<std::string>(
         "--precision",
         [&options](const std::string& v) {
           for (Precision p : kPrecisions)
             if (v == precision_name(p)) options.precision = p;
         },
         "Inputs of the large matrix products: fp32 (exact, default), bf16 (rounded to bf16 "
         "first) or int8 (rounded to 8 bits per 256 columns; .rwkvq products run in "
         "integers); weights, state and sums stay as they are")
      ->check(CLI::IsMember(precisions))
      ->option_text("fp32|bf16|int8");
  // `wick serve` chooses adapters per request (its own flags), not one at load.
  if (cmd->get_name() != "serve") add_lora_options(cmd, options);
}

void add_lora_options(CLI::App* cmd, LoadOptions& options) {
  const char* group = "LoRA adapter";
  cmd->add_option("--lora", options.lora,
                  "LoRA adapter applied at run time (.pth or .safetensors; RWKV-PEFT or "
                  "rwkv-metal names; LayerNorms in it replace the model's)")
      ->group(group);
  cmd->add_option_function<double>(
         "--lora-alpha", [&options](const double& a) { options.lora_alpha = a; },
         "alpha the adapter was trained with (required: the file does not store it, unless "
         "written by wick); scale = alpha / rank")
      ->group(group);
  cmd->add_option("--lora-scale", options.lora_scale,
                  "extra multiplier of the adapter's term (default 1)")
      ->group(group);
}

void add_attention_flags(CLI::App* cmd, AttentionFlags* f) {
  const char* group = "RWKV-X attention";
  cmd->add_option("--attention", f->mode,
                  "full (default): every cached key; moba: the current block plus the top-k past "
                  "blocks (docs/rwkvx.md 6.5)")
      ->check(CLI::IsMember({"full", "moba"}))
      ->group(group);
  cmd->add_option("--moba-block", f->moba_block,
                  "moba block size B (default: the model's, else 2048)")
      ->check(CLI::PositiveNumber)
      ->group(group);
  cmd->add_option("--moba-topk", f->moba_topk,
                  "moba past blocks chosen K (default: the model's, else 3)")
      ->check(CLI::PositiveNumber)
      ->group(group);
  cmd->add_option("--moba-scope", f->scope,
                  "shared (default: one choice for all heads, as the rwkv-x package) or per_head "
                  "(as training)")
      ->check(CLI::IsMember({"shared", "per_head"}))
      ->group(group);
  cmd->add_option("--moba-past", f->past,
                  "K (default: K past blocks + the current one, the package's decode) or K-1 "
                  "(training)")
      ->check(CLI::IsMember({"K", "K-1"}))
      ->group(group);
  cmd->add_option("--kv-max", f->kv_max,
                  "most tokens a KV cache may hold: a pass beyond it is refused, generation stops "
                  "with stop_reason kv_cache_full (default 0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
}

Model with_attention_flags(const Model& model, const AttentionFlags& f) {
  if (!f.any()) return model;
  if (model.geometry().n_attn == 0) {
    throw InputError("--attention / --moba-* / --kv-max apply to RWKV-X models, but " +
                     model.info().source +
                     " is a plain RWKV-7 model without attention blocks; drop these flags");
  }
  AttentionOptions o = model.attention();
  if (!f.mode.empty()) o.mode = f.mode == "moba" ? AttentionMode::kMoba : AttentionMode::kFull;
  if (f.moba_block) o.moba_block = f.moba_block;
  if (f.moba_topk) o.moba_topk = f.moba_topk;
  if (!f.scope.empty())
    o.moba_scope = f.scope == "per_head" ? MobaScope::kPerHead : MobaScope::kShared;
  if (!f.past.empty()) o.moba_past_k_minus_1 = f.past == "K-1";
  if (f.kv_max >= 0) o.kv_max = f.kv_max;
  return model.with_attention(o);
}

std::string describe_attention(const AttentionOptions& o) {
  std::string s =
      o.mode == AttentionMode::kFull
          ? std::string("full")
          : fmt::format("moba (B={}, K={}, {}, {} past blocks)", o.moba_block, o.moba_topk,
                        moba_scope_name(o.moba_scope), o.moba_past_k_minus_1 ? "K-1" : "K");
  if (o.kv_max > 0) s += fmt::format(", kv-max {}", o.kv_max);
  return s;
}

void add_tokenizer_mismatch_flag(CLI::App& app) {
  for (CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
    if (cmd->get_option_no_throw("--tokenizer") && cmd->get_option_no_throw("--model")) {
      cmd->add_flag("--allow-tokenizer-mismatch", g_allow_tokenizer_mismatch,
                    "Use --tokenizer even when it does not match the model's vocabulary size and "
                    "kind (experts; an id the tokenizer cannot decode is still an error)");
    }
    add_tokenizer_mismatch_flag(*cmd);
  }
}

std::unique_ptr<Tokenizer> tokenizer_for(const Model& model, const std::string& path) {
  const int32_t vocab = model.geometry().vocab;
  if (path.empty()) return default_tokenizer_for_vocab(vocab);
  std::unique_ptr<Tokenizer> t = load_tokenizer(path);
  try {
    check_tokenizer_fits(*t, vocab, path);
  } catch (const InputError& e) {
    if (!g_allow_tokenizer_mismatch) throw;
    fmt::print(stderr, "wick: warning (--allow-tokenizer-mismatch): {}\n", e.what());
  }
  return t;
}

std::unique_ptr<Tokenizer> tokenizer_or_default(const std::string& path) {
  return path.empty() ? default_world_tokenizer() : load_tokenizer(path);
}

std::vector<std::string> read_jsonl_texts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw FileError(path,
                    "cannot open (expected a JSON-lines file with a \"text\" field per line)");
  std::vector<std::string> texts;
  std::string line;
  int64_t number = 0, blank = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      if (blank == 0) blank = number;  // allowed only at the end of the file
      continue;
    }
    if (blank != 0) {
      throw InputError(path + ":" + std::to_string(blank) +
                       ": blank line between records; results are numbered by line, so every "
                       "line must hold one {\"text\": ...} object (remove the blank line)");
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path + ":" + std::to_string(number) + ": not valid JSON (" + e.what() +
                       "); expected one object per line like {\"text\": \"...\"}");
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      throw InputError(path + ":" + std::to_string(number) +
                       ": expected an object with a string field \"text\", found " +
                       j.dump().substr(0, 80));
    }
    texts.push_back(j["text"].get<std::string>());
  }
  if (in.bad()) throw FileError(path, "read error");
  return texts;
}

std::string float_json(float f) {
  if (!std::isfinite(f)) return "null";
  return fmt::format("{}", f);
}

}  // namespace wick::cli
