// wick logits --model PATH --tokens 1,2,3 [--all-positions] [--recurrent] [--init-state F]
// Prints {"logits": [[V numbers], ...]}: one row for the last position, or one per position with
// --all-positions. --recurrent runs the recurrent step token by token instead of the parallel
// pass; --init-state starts from a state-tuned initial state (wick/tuned_state.h). Numbers are
// printed in the shortest form that reads back to the same float.
#include <climits>
#include <cstdio>
#include <string>

#include "commands.h"
#include "common.h"
#include "wick/errors.h"
#include "wick/tuned_state.h"

namespace wick::cli {
namespace {

struct LogitsOptions {
  AttentionFlags attention;  // RWKV-X only
  LoadOptions load;          // --quantize
  std::string model;
  std::string tokens_text;
  std::string init_state;  // start from this state-tuned initial state
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

// "1,2,3" -> ids. Every item must be a decimal integer: empty items ("1,,2", "") are errors.
std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = 0;
    bool ok = !item.empty() && item.find_first_not_of("-0123456789") == std::string::npos;
    if (ok) {
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok || used != item.size() || v < INT32_MIN || v > INT32_MAX) {
      throw InputError("--tokens: expected comma-separated integer token ids, found item '" + item +
                       "' in '" + text + "'");
    }
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

void run_logits(LogitsOptions& o) {
  o.tokens = parse_token_list(o.tokens_text);
  Model model = with_attention_flags(load_model_or_default(o.model, o.load), o.attention);
  const int V = model.geometry().vocab;
  State state = o.init_state.empty() ? model.new_state() : load_tuned_state(o.init_state, model);
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
  add_attention_flags(cmd, &o->attention);
  add_load_options(cmd, o->load);
  cmd->add_option("-t,--tokens", o->tokens_text, "Token ids, comma separated (e.g. 34,105,110)")
      ->required();
  cmd->add_flag("--all-positions", o->all_positions, "One row per position instead of the last");
  cmd->add_flag("--recurrent", o->recurrent, "Use the recurrent step instead of the parallel pass");
  cmd->add_option("--init-state", o->init_state,
                  "Start from a state-tuned initial state (RWKV-PEFT time_state file) instead of "
                  "a zero state");
  cmd->callback([o] { run_logits(*o); });
}

}  // namespace wick::cli
