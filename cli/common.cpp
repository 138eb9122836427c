#include "common.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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

std::vector<std::string> read_jsonl_texts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open (expected a JSON-lines file with a \"text\" field per line)");
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
