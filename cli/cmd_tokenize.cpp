// wick tokenize   --tokenizer PATH [--text T | --file F]   -> JSON array of ids on stdout
// wick detokenize --tokenizer PATH IDS...                   -> the decoded text on stdout
// --file takes the file's bytes verbatim as the text (no trailing newline stripped). Without
// --tokenizer, the embedded World vocabulary is used.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "wick/errors.h"

namespace wick::cli {
namespace {

struct TokenizeOptions {
  std::string tokenizer, text, file;
  std::vector<int32_t> ids;
};

void run_tokenize(const TokenizeOptions& o, bool text_given) {
  auto tok = tokenizer_or_default(o.tokenizer);
  std::string text = o.text;
  if (!o.file.empty()) {
    std::ifstream f(o.file, std::ios::binary);
    if (!f) throw FileError(o.file, "cannot open the text file");
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  } else if (!text_given) {
    throw InputError("tokenize: give the text with --text T or --file F");
  }
  const std::vector<int32_t> ids = tok->encode(text);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run_detokenize(const TokenizeOptions& o) {
  auto tok = tokenizer_or_default(o.tokenizer);
  const std::string bytes = tok->decode(o.ids);
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  if (isatty(fileno(stdout))) std::fputc('\n', stdout);  // a pipe gets exactly the text
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text (JSON array)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or tokenizer.json (BPE); default: embedded World");
  auto* text = cmd->add_option("--text", o->text, "The text");
  auto* file = cmd->add_option("--file", o->file, "A file whose bytes are the text, verbatim");
  text->excludes(file);
  cmd->callback([o, text] { run_tokenize(*o, text->count() > 0); });
}

void register_detokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("detokenize", "Print the text of token ids");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "World vocabulary (.txt) or tokenizer.json (BPE); default: embedded World");
  cmd->add_option("ids", o->ids, "Token ids")->required()->delimiter(',');
  cmd->callback([o] { run_detokenize(*o); });
}

}  // namespace wick::cli
