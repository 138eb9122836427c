// A program built against an installed wick (tests/consumer/run.sh; README "Library"): the
// embedded default model, the tokenizer that goes with it, a few greedy tokens, the state saved
// to a file, read back and continued. Prints the text of the 8 tokens that continue the saved
// state (run.sh compares it with `wick generate --load-state STATE_FILE --prompt ""`); exits 1
// when a check fails.
//
// Usage: wick_consumer STATE_FILE
#include <wick/wick.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wick_consumer: FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s STATE_FILE\n", argv[0]);
    return 2;
  }
  const std::string state_path = argv[1];
  const std::string prompt = "Once upon a time";
  try {
    // The tiny byte-level model built into libwick, and its tokenizer (byte-level for 256 ids).
    const wick::Model model = wick::Model::load_default();
    const std::unique_ptr<wick::Tokenizer> tokenizer =
        wick::default_tokenizer_for_vocab(model.geometry().vocab);

    // Eight greedy tokens (the default SamplingConfig is greedy) from a fresh state.
    wick::GenerationConfig config;
    config.max_tokens = 8;
    wick::State state = model.new_state();
    const wick::GenerationResult first = wick::generate(model, *tokenizer, prompt, config, state);
    check(first.generated_tokens == 8 && first.tokens.size() == 8, "8 tokens generated");
    check(first.stop_reason == wick::StopReason::kMaxTokens, "stopped at max_tokens");
    check(first.prompt_tokens == static_cast<int>(tokenizer->encode(prompt).size()),
          "prompt tokens counted");

    // Greedy means: the first token is the argmax of the logits after the prompt.
    wick::State prefilled = model.new_state();
    const std::vector<int32_t> prompt_ids = tokenizer->encode(prompt);
    const std::vector<float> logits = model.forward(prompt_ids, prefilled);
    check(!first.tokens.empty() && first.tokens[0] == wick::argmax(logits),
          "first token is the argmax after the prompt");

    // Save the state with what continuing it needs, and read it back.
    wick::StateFileInfo info;
    info.note = "wick consumer test";
    info.tokenizer = std::string(tokenizer->name());
    info.n_tokens = first.prompt_tokens + first.generated_tokens;
    info.continuation = first.continuation;
    wick::save_state(state_path, state, model, info);
    wick::LoadedState loaded = wick::load_state(state_path, model);
    check(loaded.state == state, "the state read back equals the state saved");
    check(loaded.info.n_tokens == info.n_tokens && loaded.info.note == info.note,
          "the state file's metadata read back");
    check(loaded.warnings.empty(), "no warnings reading the state file");

    // Continuing the state read back (no new text) gives what continuing the one in memory gives,
    // and both equal one uninterrupted run of 16 tokens.
    const wick::GenerationResult in_memory =
        wick::generate(model, *tokenizer, "", config, state, first.continuation);
    const wick::GenerationResult from_file =
        wick::generate(model, *tokenizer, "", config, loaded.state, loaded.info.continuation);
    check(in_memory.generated_tokens == 8 && from_file.tokens == in_memory.tokens,
          "continuing from the file equals continuing in memory");
    check(loaded.state == state, "both continued states are equal");
    wick::GenerationConfig config16 = config;
    config16.max_tokens = 16;
    const wick::GenerationResult whole = wick::generate(model, *tokenizer, prompt, config16);
    std::vector<int32_t> joined = first.tokens;
    joined.insert(joined.end(), in_memory.tokens.begin(), in_memory.tokens.end());
    check(whole.tokens == joined, "8 + 8 tokens equal one run of 16");

    std::fwrite(in_memory.text.data(), 1, in_memory.text.size(), stdout);
  } catch (const wick::Error& e) {
    std::fprintf(stderr, "wick_consumer: FAILED: %s\n", e.what());
    return 1;
  }
  if (failures > 0) return 1;
  std::fprintf(stderr, "wick_consumer: all checks passed\n");
  return 0;
}
