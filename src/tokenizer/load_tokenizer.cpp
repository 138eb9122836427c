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
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  if (tokenizer.vocab_size() > model_vocab) {
    throw InputError("tokenizer " + tokenizer_name + " (" + std::string(tokenizer.name()) +
                     ") produces ids up to " + std::to_string(tokenizer.vocab_size() - 1) +
                     " but the model's vocabulary has " + std::to_string(model_vocab) +
                     " tokens: this tokenizer does not belong to this model (World models need "
                     "the World vocabulary, Pile models the 20B tokenizer)");
  }
}

}  // namespace wick
