// Choosing and checking tokenizers (include/wick/tokenizer.h).
#include <string>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/world_tokenizer.h"
#include "wick/errors.h"
#include "wick/tokenizer.h"

extern "C" {
extern const unsigned char wick_world_vocab_start[];
extern const unsigned char wick_world_vocab_end[];
}

namespace wick {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::unique_ptr<Tokenizer> default_world_tokenizer() {
  const std::string_view bytes(reinterpret_cast<const char*>(wick_world_vocab_start),
                               static_cast<size_t>(wick_world_vocab_end - wick_world_vocab_start));
  return WorldTokenizer::parse(bytes, "<embedded rwkv_vocab_v20230424.txt>");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (ends_with(path, ".json")) return BpeTokenizer::load(path);
  return load_world_tokenizer(path);
}

std::unique_ptr<Tokenizer> default_tokenizer_for_vocab(int32_t model_vocab) {
  if (model_vocab == 256) return std::make_unique<ByteTokenizer>();
  if (model_vocab == 65536) return default_world_tokenizer();
  throw InputError("no default tokenizer for a vocabulary of " + std::to_string(model_vocab) +
                   " tokens (byte-level is used for 256, World for 65536); pass --tokenizer "
                   "with the model's tokenizer file");
}

void check_tokenizer_fits(const Tokenizer& tokenizer, int32_t model_vocab,
                          const std::string& tokenizer_name) {
  const int32_t ids = tokenizer.vocab_size();
  // The kind, where the size names one tokenizer.
  const char* kind = model_vocab == 65536 ? "world" : model_vocab == 256 ? "byte-level" : nullptr;
  // Embeddings are padded by a few rows at most (65530 -> 65536, 50277 -> 50304, Qwen 151665 ->
  // 151936); a tokenizer lacking more of the model's ids cannot decode what the model generates.
  const int64_t unused = static_cast<int64_t>(model_vocab) - ids;
  std::string problem;
  if (ids > model_vocab) {
    problem = "produces ids up to " + std::to_string(ids - 1) + " but the model's vocabulary has " +
              std::to_string(model_vocab) + " tokens";
  } else if (unused * 100 > model_vocab) {
    problem = "covers only " + std::to_string(ids) + " of the model's " +
              std::to_string(model_vocab) + " tokens (at most 1% unused padding expected): ids " +
              std::to_string(ids) + ".." + std::to_string(model_vocab - 1) +
              " could not be decoded";
  } else if (kind && tokenizer.name() != kind) {
    problem = "is not the kind the model's " + std::to_string(model_vocab) + " tokens need";
  } else {
    return;
  }
  throw InputError(
      "tokenizer " + tokenizer_name + " (" + std::string(tokenizer.name()) + ", ids 0.." +
      std::to_string(ids - 1) + ") " + problem +
      (kind ? std::string("; expected the ") + kind + " tokenizer for a vocabulary of " +
                  std::to_string(model_vocab)
            : std::string()) +
      ". This tokenizer does not belong to this model (World models need the World vocabulary, "
      "byte-level models the byte-level tokenizer, Pile models the 20B tokenizer): use the "
      "model's own tokenizer (without --tokenizer wick picks it for vocabularies of 256 and "
      "65536), or pass --allow-tokenizer-mismatch if you know the ids mean the same");
}

}  // namespace wick
