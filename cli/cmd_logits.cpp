// wick logits --model PATH --tokens 1,2,3 [--all-positions] [--recurrent]
// Prints {"logits": [[V numbers], ...]}: one row for the last position, or one per position with
// --all-positions. --recurrent runs the recurrent step token by token instead of the parallel
// pass. Numbers are printed in the shortest form that reads back to the same float.
#include <cstdio>
#include <string>

#include "commands.h"
#include "common.h"
#include "wick/errors.h"

namespace wick::cli {
namespace {

struct LogitsOptions {
  std::string model;
  std::vector<int32_t> tokens;
  bool all_positions = false;
  bool recurrent = false;
};

void print_rows(const std::vector<std::vector<float>>& rows) {
  std::string out = "{\"logits\": [";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += r ? ",\n[" : "\n[";
    for (size_t i = 0; i < rows[r].size(); ++i) {
      if (i) out += ", ";
      out += float_json(rows[r][i]);
    }
    out += "]";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run_logits(const LogitsOptions& o) {
  if (o.tokens.empty()) throw InputError("--tokens needs at least one token id");
  Model model = load_model_or_default(o.model);
  const int V = model.geometry().vocab;
  State state = model.new_state();
  std::vector<std::vector<float>> rows;
  if (o.recurrent) {
    for (size_t t = 0; t < o.tokens.size(); ++t) {
      std::vector<float> l = model.step(o.tokens[t], state);
      if (o.all_positions || t + 1 == o.tokens.size()) rows.push_back(std::move(l));
    }
  } else {
    std::vector<float> l = model.forward(o.tokens, state, o.all_positions);
    for (size_t r = 0; r < l.size() / V; ++r)
      rows.emplace_back(l.begin() + r * V, l.begin() + (r + 1) * V);
  }
  print_rows(rows);
}

}  // namespace

void register_logits(CLI::App& app) {
  auto o = std::make_shared<LogitsOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "Print the logits for a list of token ids (JSON)");
  cmd->add_option("-m,--model", o->model, "Checkpoint; default: the embedded tiny model");
  cmd->add_option("-t,--tokens", o->tokens, "Token ids, comma separated")
      ->required()
      ->delimiter(',');
  cmd->add_flag("--all-positions", o->all_positions, "One row per position instead of the last");
  cmd->add_flag("--recurrent", o->recurrent, "Use the recurrent step instead of the parallel pass");
  cmd->callback([o] { run_logits(*o); });
}

}  // namespace wick::cli
