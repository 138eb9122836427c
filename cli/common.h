// Helpers shared by the subcommands: loading the model (or the embedded default), picking the
// tokenizer, printing errors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::cli {

// Loads `path`, or the embedded default model when it is empty.
Model load_model_or_default(const std::string& path);
// The tokenizer for a model: `path` if given (checked against the model's vocabulary), else
// byte-level for vocabulary 256 and the embedded World vocabulary for 65536.
std::unique_ptr<Tokenizer> tokenizer_for(const Model& model, const std::string& path = "");
// `path`, or the embedded World vocabulary when empty.
std::unique_ptr<Tokenizer> tokenizer_or_default(const std::string& path);
// The `text` field of every line of a JSON-lines file, in order: item i is line i + 1 (blank
// lines are allowed only at the end). Throws FileError (cannot read) and InputError naming the
// line (a blank line between records, not JSON, not an object, no string `text`, invalid UTF-8).
std::vector<std::string> read_jsonl_texts(const std::string& path);
// Shortest text that reads back to the same float ("null" for NaN/Inf, which JSON cannot hold).
std::string float_json(float f);

}  // namespace wick::cli
