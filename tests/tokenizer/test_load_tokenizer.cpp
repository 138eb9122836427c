// Choosing tokenizers by file, the embedded World vocabulary, checking a tokenizer against a
// model, and the tokenize / detokenize / generate --tokenizer command lines.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "test_util.h"
#include "wick/errors.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

std::string run_cli(const std::string& args, int* status) {
  const CliRun r = run_wick(args);
  *status = r.status;
  return r.out;
}

TEST(LoadTokenizer, PicksTheKindFromTheFileAndEmbeddedWorldEqualsTheFile) {
  auto world = load_tokenizer(fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  auto bpe = load_tokenizer(fixture("tokenizers/vocab/20B_tokenizer.json"));
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(bpe->name(), "bpe");
  auto embedded = default_world_tokenizer();
  const std::string text = "Hello, world! Привет 你好 \xf0\x9f\x98\x80\n\n";
  EXPECT_EQ(embedded->encode(text), world->encode(text));
  EXPECT_EQ(embedded->vocab_size(), world->vocab_size());
  EXPECT_NE(bpe->encode(text), world->encode(text));
}

TEST(LoadTokenizer, DefaultsByVocabularyAndRefusesTokenizersTooBigForTheModel) {
  EXPECT_EQ(default_tokenizer_for_vocab(256)->name(), "byte-level");
  EXPECT_EQ(default_tokenizer_for_vocab(65536)->name(), "world");
  EXPECT_THROW(default_tokenizer_for_vocab(50304), InputError);
  auto world = default_world_tokenizer();
  EXPECT_NO_THROW(check_tokenizer_fits(*world, 65536, "world"));
  try {
    check_tokenizer_fits(*world, 50304, "rwkv_vocab.txt");  // World vocab on a Pile model
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("50304"), std::string::npos) << e.what();
  }
  auto bpe = load_tokenizer(fixture("tokenizers/vocab/20B_tokenizer.json"));
  EXPECT_NO_THROW(check_tokenizer_fits(*bpe, 50304, "20B"));
  EXPECT_THROW(check_tokenizer_fits(*bpe, 256, "20B"), InputError);
}

// A foreign tokenizer on a World model used to run (exit 0) and drop the ids it lacked from the
// text: only "tokenizer larger than the model" was refused. Now the size and the kind must match
// in both directions.
TEST(LoadTokenizer, RefusesATokenizerOfAnotherSizeOrKindInBothDirections) {
  auto world = default_world_tokenizer();
  auto bpe = load_tokenizer(fixture("tokenizers/vocab/20B_tokenizer.json"));
  const ByteTokenizer bytes;
  auto message = [](const Tokenizer& t, int32_t vocab) -> std::string {
    try {
      check_tokenizer_fits(t, vocab, "tok");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  // The 20B tokenizer (50277 ids) on a World model: 15259 model ids it cannot decode.
  const std::string m = message(*bpe, 65536);
  EXPECT_NE(m.find("65536"), std::string::npos) << m;
  EXPECT_NE(m.find("world"), std::string::npos) << m;           // what was expected
  EXPECT_NE(m.find("bpe"), std::string::npos) << m;             // what was found
  EXPECT_NE(m.find("--allow-tokenizer-mismatch"), std::string::npos) << m;  // what to do
  EXPECT_NE(message(bytes, 65536), "");         // byte-level on a World model
  EXPECT_NE(message(*world, 256), "");          // World on a byte-level model
  EXPECT_NE(message(*bpe, 100000), "");         // half the model's ids undecodable
  EXPECT_EQ(message(*world, 65536), "");        // 65530 ids, 6 padding rows
  EXPECT_EQ(message(bytes, 256), "");
  EXPECT_EQ(message(*bpe, 50304), "");          // 27 padding rows
  EXPECT_EQ(message(*bpe, 50277), "");
}

// The command line refuses the mismatch on every command that takes a model and --tokenizer, and
// --allow-tokenizer-mismatch lets an expert through; a generated id the tokenizer lacks is then an
// error naming it, not a silent gap in the text.
TEST(LoadTokenizer, CommandLineRefusesAMismatchAndNeverDropsAnId) {
  const auto dir = scratch_dir();
  const std::string model = (dir / "world.safetensors").string();
  ASSERT_EQ(run_wick("synth --geometry 1:64 --dtype fp32 --seed 2 --out " + shell_quote(model)).status, 0);
  const std::string bpe = shell_quote(fixture("tokenizers/vocab/20B_tokenizer.json"));
  const std::string base = "generate --model " + shell_quote(model) + " --tokenizer " + bpe +
                           " --prompt hi -n 64 --temperature 1 --seed 3 --json";
  const CliRun refused = run_wick(base);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("--allow-tokenizer-mismatch"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
  // Allowed: a warning, then the first id >= 50277 the random model draws is an error naming it.
  const CliRun allowed = run_wick(base + " --allow-tokenizer-mismatch");
  EXPECT_EQ(allowed.status, 1) << allowed.out;
  EXPECT_NE(allowed.err.find("warning (--allow-tokenizer-mismatch)"), std::string::npos) << allowed.err;
  EXPECT_NE(allowed.err.find("the model generated token id "), std::string::npos) << allowed.err;
  // The flag exists wherever a model's --tokenizer does (and nowhere else).
  for (const char* cmd : {"generate", "chat", "serve", "ppl", "kl", "embed", "rerank", "act-stats",
                          "calibrate", "bench generate", "bench serve", "bench embed",
                          "bench rerank"}) {
    const CliRun help = run_wick(std::string(cmd) + " --help");
    EXPECT_NE(help.out.find("--allow-tokenizer-mismatch"), std::string::npos) << cmd;
  }
  EXPECT_EQ(run_wick("tokenize --help").out.find("--allow-tokenizer-mismatch"), std::string::npos);
}

TEST(LoadTokenizer, TokenizeAndDetokenizeCommandLines) {
  int st = -1;
  // World spot check from the fixtures README: "Internationalizatio" is greedy, not optimal.
  std::string out = run_cli("tokenize --text Internationalizatio", &st);
  ASSERT_EQ(st, 0);
  EXPECT_EQ(nlohmann::json::parse(out), nlohmann::json::parse("[64762, 7945, 2210, 112]"));
  // --file takes the bytes verbatim (the trailing newlines count).
  const auto dir = scratch_dir();
  write_file(dir / "t.txt", "\n\n");
  out = run_cli("tokenize --file " + (dir / "t.txt").string(), &st);
  EXPECT_EQ(nlohmann::json::parse(out), nlohmann::json::parse("[261]"));
  out = run_cli("tokenize --tokenizer " + fixture("tokenizers/vocab/20B_tokenizer.json") +
                    " --text 'Hello world'",
                &st);
  ASSERT_EQ(st, 0);
  const auto ids = nlohmann::json::parse(out).get<std::vector<int32_t>>();
  EXPECT_EQ(ids, load_tokenizer(fixture("tokenizers/vocab/20B_tokenizer.json"))->encode("Hello world"));
  out = run_cli("detokenize 64762 7945 2210 112", &st);
  EXPECT_EQ(out, "Internationalizatio");  // exactly the text on a pipe
  // A World tokenizer given to the byte-level tiny model is refused.
  run_cli("generate --prompt hi --tokenizer " + fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"), &st);
  EXPECT_EQ(st, 1);
}

}  // namespace
}  // namespace wick::test

namespace wick::test {
namespace {

// Streaming decode equals whole decode (invalid bytes replaced) for the BPE tokenizer too, on
// every corpus text fed one token at a time.
TEST(LoadTokenizer, BpeStreamingDecodeEqualsWholeDecodeOnTheCorpus) {
  auto bpe = load_tokenizer(fixture("tokenizers/vocab/20B_tokenizer.json"));
  int texts = 0;
  for (const nlohmann::json& row : read_jsonl("tokenizers/corpus.jsonl")) {
    const std::string text = row["text"].get<std::string>();
    const std::vector<int32_t> ids = bpe->encode(text);
    StreamDecoder dec(*bpe);
    std::string streamed;
    for (int32_t id : ids) streamed += dec.push(id);
    streamed += dec.flush();
    EXPECT_EQ(streamed, utf8_replace_invalid(bpe->decode(ids))) << row.dump();
    ++texts;
  }
  EXPECT_EQ(texts, 1884);
}

}  // namespace
}  // namespace wick::test
