#include "evaluation_text.h"

#include "wick/errors.h"

namespace wick::cli {

EvaluationText load_evaluation_text(const std::string& path, const Tokenizer& tokenizer,
                                    const WindowOptions& options) {
  const std::string text = read_evaluation_text(path);
  const std::vector<int32_t> ids = tokenizer.encode(text);
  EvaluationText t;
  try {
    t.windows = cut_windows(ids, options);
  } catch (const InputError& e) {
    // The library speaks of "ctx"; the user typed --ctx and a file name.
    throw InputError(path + ": " + e.what() + " (--ctx sets the window length)");
  }
  t.text_tokens = static_cast<int64_t>(ids.size());
  t.unused_tokens = t.text_tokens - static_cast<int64_t>(t.windows.size()) * options.ctx;
  return t;
}

}  // namespace wick::cli
