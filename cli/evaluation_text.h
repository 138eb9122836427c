// The text of `wick ppl` and `wick kl`: read (UTF-8 checked), tokenised once and cut into
// windows (include/wick/perplexity.h), with every error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wick/perplexity.h"
#include "wick/tokenizer.h"

namespace wick::cli {

struct EvaluationText {
  std::vector<std::vector<int32_t>> windows;
  int64_t text_tokens = 0;    // tokens of the whole text
  int64_t unused_tokens = 0;  // tokens in no window: the partial tail and windows past the limit
};

// Throws FileError / InputError (not UTF-8, too short for one window: says to use a shorter
// --ctx or a longer text), each naming `path`.
EvaluationText load_evaluation_text(const std::string& path, const Tokenizer& tokenizer,
                                    const WindowOptions& options);

}  // namespace wick::cli
