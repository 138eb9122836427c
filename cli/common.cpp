#include "common.h"

#include <fmt/format.h>

#include <cmath>

#include "wick/errors.h"

namespace wick::cli {

Model load_model_or_default(const std::string& path) {
  return path.empty() ? Model::load_default() : Model::load(path);
}

std::unique_ptr<Tokenizer> tokenizer_for(const Model& model) {
  if (model.geometry().vocab == 256) return std::make_unique<ByteTokenizer>();
  throw Error("this model has a vocabulary of " + std::to_string(model.geometry().vocab) +
              " tokens; this build of wick tokenizes text only for byte-level (vocabulary 256) "
              "models. Run `wick logits --tokens ...` with token ids instead");
}

std::string float_json(float f) {
  if (!std::isfinite(f)) return "null";
  return fmt::format("{}", f);
}

}  // namespace wick::cli
