#include "common.h"

#include <fmt/format.h>

#include <cmath>

#include "wick/errors.h"

namespace wick::cli {

Model load_model_or_default(const std::string& path) {
  return path.empty() ? Model::load_default() : Model::load(path);
}

std::unique_ptr<Tokenizer> tokenizer_for(const Model& model, const std::string& path) {
  const int32_t vocab = model.geometry().vocab;
  if (path.empty()) return default_tokenizer_for_vocab(vocab);
  std::unique_ptr<Tokenizer> t = load_tokenizer(path);
  check_tokenizer_fits(*t, vocab, path);
  return t;
}

std::unique_ptr<Tokenizer> tokenizer_or_default(const std::string& path) {
  return path.empty() ? default_world_tokenizer() : load_tokenizer(path);
}

std::string float_json(float f) {
  if (!std::isfinite(f)) return "null";
  return fmt::format("{}", f);
}

}  // namespace wick::cli
