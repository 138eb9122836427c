// read_evaluation_text (include/wick/perplexity.h): the text file of `wick ppl` / `wick kl`.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/utf8.h"
#include "wick/errors.h"
#include "wick/perplexity.h"

namespace wick {

std::string read_evaluation_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw FileError(path, "is a folder, not a text file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError(path, "cannot open the text file");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw FileError(path, "cannot read the text file");
  std::string text = std::move(ss).str();
  const size_t valid = base::utf8::valid_prefix_length(text);
  if (valid != text.size()) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(valid), '\n');
    throw InputError(fmt::format(
        "{}: not valid UTF-8: byte 0x{:02X} at offset {} (line {}) starts an invalid or "
        "truncated sequence; the evaluation text must be UTF-8 (convert it, e.g. with iconv)",
        path, static_cast<unsigned char>(text[valid]), valid, line));
  }
  return text;
}

}  // namespace wick
