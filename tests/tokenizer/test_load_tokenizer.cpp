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
