// Byte-level BPE tokenizer: id parity with HuggingFace tokenizers 0.23.2 on the shared fixtures
// (20B, 20B re-saved with pair merges, GPT-2, tiny with a template), decode parity, and the
// load-time refusals of bpe/reject/.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/unicode_norm.h"
#include "tokenizer/unicode_tables.h"
#include "wick/errors.h"

namespace wick {
namespace {

using json = nlohmann::json;
using wick::test::read_jsonl;

std::string vocab_path(const std::string& name) {
  return test::fixture("tokenizers/vocab/" + name);
}

// bytes.decode('utf-8', errors='replace'): each maximal invalid subpart becomes one U+FFFD.
std::string lossy(const std::string& s) {
  std::string out;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      out.push_back(char(c));
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < n) {
      const unsigned char d = b[i + k];
      if (k == 1 ? (d < lo || d > hi) : ((d & 0xC0) != 0x80)) break;
      ++k;
    }
    if (k == len) {
      out.append(s, i, len);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += k;
  }
  return out;
}

std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }

struct ParityCounts {
  int rows = 0, encode_bad = 0, decode_bad = 0;
};

// Checks every record of a bpe_*_expected.jsonl file.
ParityCounts check_encode_file(const BpeTokenizer& tok, const std::string& rel, bool tiny) {
  ParityCounts c;
  for (const json& r : read_jsonl(rel)) {
    ++c.rows;
    const std::string text = r["text"].get<std::string>();
    const std::string id = r["id"].get<std::string>();
    const std::vector<int32_t> got = tok.encode(text);
    if (got != ids_of(r["ids"])) {
      if (++c.encode_bad <= 5) ADD_FAILURE() << rel << " " << id << ": ids differ";
    }
    if (tiny && tok.encode(text, false) != ids_of(r["ids_no_special"])) {
      if (++c.encode_bad <= 5) ADD_FAILURE() << rel << " " << id << ": ids_no_special differ";
    }
    const std::vector<int32_t> want_ids = ids_of(r["ids"]);
    const std::string decoded = r["decoded"].get<std::string>();
    const std::string skip = r.contains("decoded_skip_special")
                                 ? r["decoded_skip_special"].get<std::string>()
                                 : decoded;
    if (lossy(tok.decode(want_ids)) != decoded || lossy(tok.decode(want_ids, true)) != skip) {
      if (++c.decode_bad <= 5) ADD_FAILURE() << rel << " " << id << ": decode differs";
    }
  }
  return c;
}

TEST(BpeParity, Gpt2EncodeDecode) {
  auto tok = BpeTokenizer::load(vocab_path("gpt2_tokenizer.json"));
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->name(), "bpe");
  const ParityCounts c = check_encode_file(*tok, "tokenizers/bpe/bpe_gpt2_expected.jsonl", false);
  EXPECT_EQ(c.rows, 1884);
  EXPECT_EQ(c.encode_bad, 0);
  EXPECT_EQ(c.decode_bad, 0);
}

TEST(BpeParity, NeoX20BEncodeDecode) {
  auto tok = BpeTokenizer::load(vocab_path("20B_tokenizer.json"));
  EXPECT_EQ(tok->vocab_size(), 50277);
  const ParityCounts c = check_encode_file(*tok, "tokenizers/bpe/bpe_20B_expected.jsonl", false);
  EXPECT_EQ(c.rows, 1884);
  EXPECT_EQ(c.encode_bad, 0);
  EXPECT_EQ(c.decode_bad, 0);
}

TEST(BpeParity, NeoX20BPairMergesSameIds) {
  auto strings = BpeTokenizer::load(vocab_path("20B_tokenizer.json"));
  auto pairs = BpeTokenizer::load(vocab_path("20B_tokenizer.pairs.json"));
  EXPECT_EQ(pairs->vocab_size(), strings->vocab_size());
  int bad = 0, rows = 0;
  for (const json& r : read_jsonl("tokenizers/bpe/bpe_20B_expected.jsonl")) {
    ++rows;
    const std::string text = r["text"].get<std::string>();
    const auto a = strings->encode(text), b = pairs->encode(text);
    if (a != b || b != ids_of(r["ids"])) {
      if (++bad <= 5) ADD_FAILURE() << r["id"] << ": pair-merge file gives other ids";
    }
  }
  EXPECT_EQ(rows, 1884);
  EXPECT_EQ(bad, 0);
}

TEST(BpeParity, TinyTemplateEncodeDecode) {
  auto tok = BpeTokenizer::load(vocab_path("tiny_bpe_1k.json"));
  EXPECT_EQ(tok->vocab_size(), 1245);
  const ParityCounts c = check_encode_file(*tok, "tokenizers/bpe/bpe_tiny1k_expected.jsonl", true);
  EXPECT_EQ(c.rows, 1884);
  EXPECT_EQ(c.encode_bad, 0);
  EXPECT_EQ(c.decode_bad, 0);
  EXPECT_EQ(tok->encode(""), std::vector<int32_t>{0});
  EXPECT_TRUE(tok->encode("", false).empty());
}

void check_decode_file(const BpeTokenizer& tok, const std::string& rel, int want_rows) {
  int rows = 0, oor = 0, bad = 0;
  for (const json& r : read_jsonl(rel)) {
    ++rows;
    const std::vector<int32_t> ids = ids_of(r["ids"]);
    if (r.value("out_of_range", false)) {
      // The reference skips unknown ids silently; wick reports them.
      ++oor;
      EXPECT_THROW(tok.decode(ids), InputError) << r["id"];
      EXPECT_THROW(tok.decode(ids, true), InputError) << r["id"];
      continue;
    }
    if (lossy(tok.decode(ids)) != r["decoded"].get<std::string>() ||
        lossy(tok.decode(ids, true)) != r["decoded_skip_special"].get<std::string>()) {
      if (++bad <= 5) ADD_FAILURE() << rel << " " << r["id"] << ": decode differs";
    }
  }
  EXPECT_EQ(rows, want_rows);
  EXPECT_EQ(oor, 4);
  EXPECT_EQ(bad, 0);
}

TEST(BpeParity, DecodeFixtures) {
  auto neox = BpeTokenizer::load(vocab_path("20B_tokenizer.json"));
  check_decode_file(*neox, "tokenizers/bpe/bpe_20B_decode_expected.jsonl", 192);
  auto gpt2 = BpeTokenizer::load(vocab_path("gpt2_tokenizer.json"));
  check_decode_file(*gpt2, "tokenizers/bpe/bpe_gpt2_decode_expected.jsonl", 177);
}

// The spec's worked examples (20B unless said otherwise).
TEST(BpeTokenizer, SpecExamples) {
  auto neox = BpeTokenizer::load(vocab_path("20B_tokenizer.json"));
  using V = std::vector<int32_t>;
  EXPECT_EQ(neox->encode("a<|endoftext|>b"), (V{66, 0, 67}));
  // (spelled out: "a" + std::string(n, ' ') + "b" trips a GCC 12 stringop false positive)
  const std::string a30b = "a                              b", a25b = "a                         b";
  ASSERT_EQ(a30b.size(), 32u);
  ASSERT_EQ(a25b.size(), 27u);
  EXPECT_EQ(neox->encode(a30b), (V{66, 50254, 50272, 67}));
  EXPECT_EQ(neox->encode(a25b), (V{66, 50254, 270}));
  EXPECT_EQ(neox->encode(std::string(25, ' ')), (V{50254, 209}));
  EXPECT_EQ(neox->encode("x  \ny"), (V{89, 50276, 187, 90}));
  EXPECT_EQ(neox->encode("a   b"), (V{66, 50275, 67}));
  EXPECT_EQ(neox->encode("Hello"), (V{12092}));
  // NFC: "e" + U+0301 is "é".
  EXPECT_EQ(neox->encode("e\xCC\x81"), neox->encode("\xC3\xA9"));
  EXPECT_EQ(neox->decode(neox->encode("e\xCC\x81")), "\xC3\xA9");

  auto gpt2 = BpeTokenizer::load(vocab_path("gpt2_tokenizer.json"));
  EXPECT_EQ(gpt2->encode("a   b"), (V{64, 220, 220, 275}));
  EXPECT_EQ(gpt2->token_to_id("<|endoftext|>"), 50256);
  EXPECT_EQ(gpt2->id_to_token(50256), "<|endoftext|>");
  EXPECT_TRUE(gpt2->is_special(50256));
  EXPECT_FALSE(gpt2->is_special(64));
  EXPECT_EQ(gpt2->id_to_token(220), "\xC4\xA0");  // "Ġ"
}

TEST(BpeTokenizer, SpecialTokenTextOption) {
  BpeOptions literal;
  literal.special_token_text = BpeOptions::SpecialTokenText::kText;
  auto tok = BpeTokenizer::load(vocab_path("20B_tokenizer.json"), literal);
  const std::string text = "a<|endoftext|>b<|padding|>";
  const std::vector<int32_t> ids = tok->encode(text);
  for (int32_t id : ids) EXPECT_FALSE(id == 0 || id == 1) << "special id in literal mode";
  EXPECT_EQ(tok->decode(ids), text);
  // Non-special added tokens (whitespace runs) still match.
  EXPECT_EQ(tok->encode("a   b"), (std::vector<int32_t>{66, 50275, 67}));
  // Decoding the special ids themselves is unchanged.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{0}), "<|endoftext|>");
}

TEST(BpeTokenizer, RejectsInvalidUtf8AndUnknownIds) {
  auto tok = BpeTokenizer::load(vocab_path("gpt2_tokenizer.json"));
  for (const std::string bad : {std::string("ab\xFF"), std::string("\xC0\x80"),
                                std::string("x\xE4\xB8"), std::string("\xED\xA0\x80"),
                                std::string("\xF4\x90\x80\x80")}) {
    EXPECT_THROW(tok->encode(bad), InputError);
  }
  EXPECT_EQ(tok->encode(std::string("a\0b", 3)), (std::vector<int32_t>{64, 188, 65}));
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), InputError);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{50257}), InputError);
  EXPECT_THROW(BpeTokenizer::load("/nonexistent/tokenizer.json"), FileError);
  EXPECT_THROW(BpeTokenizer::load_from_json("{", "inline"), FormatError);
}

// Words longer than 64 bytes take the heap path. Compare it with a naive BPE written from the
// spec (strings, lowest rank first, leftmost on ties) on long words built to merge a lot.
std::vector<int32_t> naive_bpe(const json& model, const std::string& word_bytes) {
  // Byte-level alphabet, as in the spec.
  std::vector<std::string> sym_of(256);
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool same = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = same ? b : next++;
    std::string u;
    if (cp < 0x80) u.push_back(char(cp));
    else u = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    sym_of[b] = u;
  }
  std::map<std::pair<std::string, std::string>, size_t> rank;
  const json& merges = model["merges"];
  for (size_t r = 0; r < merges.size(); ++r) {
    rank[{merges[r][0].get<std::string>(), merges[r][1].get<std::string>()}] = r;
  }
  std::vector<std::string> syms;
  for (unsigned char c : word_bytes) syms.push_back(sym_of[c]);
  while (syms.size() > 1) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = rank.find({syms[i], syms[i + 1]});
      if (it != rank.end() && it->second < best_rank) best_rank = it->second, best = i;
    }
    if (best == SIZE_MAX) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + std::ptrdiff_t(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& s : syms) ids.push_back(model["vocab"][s].get<int32_t>());
  return ids;
}

TEST(BpeTokenizer, LongWordsMatchNaiveBpe) {
  std::ifstream f(vocab_path("gpt2_tokenizer.json"));
  const json j = json::parse(f);
  auto tok = BpeTokenizer::load_from_json(j.dump(), "gpt2");
  std::vector<std::string> words;
  std::string w;
  for (int i = 0; i < 40; ++i) w += "international";  // one 520-letter word
  words.push_back(w);
  // (emplace_back(n, c): push_back of a temporary std::string(n, c) trips a GCC 12 stringop
  // false positive)
  words.emplace_back(700, 'a');
  words.emplace_back(300, ' ');  // a run at the end of the text is one word
  std::string mixed;
  for (int i = 0; i < 400; ++i) mixed.push_back(char('a' + (i * 7 + i / 13) % 26));
  words.push_back(mixed);
  std::string digits;
  for (int i = 0; i < 200; ++i) digits.push_back(char('0' + (i * 3) % 10));
  words.push_back(digits);
  for (const std::string& word : words) {
    EXPECT_EQ(tok->encode(word), naive_bpe(j["model"], word)) << word.substr(0, 20);
    EXPECT_EQ(tok->decode(tok->encode(word)), word);
  }
}

// Duplicate merges: the later one wins, as in the reference (its merge map is built by inserting
// in order). Ids from tokenizers 0.23.2 on tiny_bpe_1k.json with merges[1] ("Ġ t") appended again.
TEST(BpeTokenizer, DuplicateMergeLastWins) {
  std::ifstream f(vocab_path("tiny_bpe_1k.json"));
  json j = json::parse(f);
  j["model"]["merges"].push_back(j["model"]["merges"][1]);
  auto tok = BpeTokenizer::load_from_json(j.dump(), "tiny+dup");
  EXPECT_EQ(tok->encode("the cat at the hat"),
            (std::vector<int32_t>{0, 209, 783, 260, 255, 387, 209, 783, 288, 255}));
}

// ignore_merges: a pre-token that is itself a vocabulary token is taken whole. Ids from
// tokenizers 0.23.2 on tiny_bpe_1k.json plus the vocabulary entry "Ġxyzzy" = 1245 (no merge
// builds it).
TEST(BpeTokenizer, IgnoreMerges) {
  std::ifstream f(vocab_path("tiny_bpe_1k.json"));
  json j = json::parse(f);
  j["model"]["vocab"]["\xC4\xA0xyzzy"] = 1245;
  auto plain = BpeTokenizer::load_from_json(j.dump(), "tiny+xyzzy");
  EXPECT_EQ(plain->encode(" xyzzy"), (std::vector<int32_t>{0, 209, 89, 90, 91, 91, 90}));
  j["model"]["ignore_merges"] = true;
  auto whole = BpeTokenizer::load_from_json(j.dump(), "tiny+xyzzy+ignore_merges");
  EXPECT_EQ(whole->encode("xyzzy and the xyzzy!"),
            (std::vector<int32_t>{0, 1245, 285, 253, 1245, 2}));
  EXPECT_EQ(whole->encode("xyzzyxyzzy"),
            (std::vector<int32_t>{0, 209, 89, 90, 91, 91, 90, 89, 90, 91, 91, 90}));
}

// NFKC normalizer: the 20B tokenizer with {"type": "NFKC"}; ids from tokenizers 0.23.2 (the whole
// corpus was compared while developing: 1 884 / 1 884 equal, 194 of them differ from NFC).
TEST(BpeTokenizer, NfkcNormalizer) {
  std::ifstream f(vocab_path("20B_tokenizer.json"));
  json j = json::parse(f);
  j["normalizer"] = {{"type", "NFKC"}};
  auto tok = BpeTokenizer::load_from_json(j.dump(), "20B+NFKC");
  using V = std::vector<int32_t>;
  const std::vector<std::pair<std::string, V>> cases = {
      {"\xEF\xBC\x90\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93\xEF\xBC\x94\xEF\xBC\x95\xEF\xBC\x96\xEF"
       "\xBC\x97\xEF\xBC\x98\xEF\xBC\x99",
       {39154, 1857, 43784}},  // full-width digits
      {"\xEF\xAC\x81 \xEF\xAC\x82 \xEF\xAC\x80 \xEF\xAC\x83 \xEF\xAC\x84",
       {11125, 892, 34082, 269, 11125, 269, 1258}},  // ligatures
      {"\xE1\xBA\x9B\xCC\xA3", {15868, 104}},
      {"\xC7\x85 \xC7\x86 \xC7\x84", {37, 9124, 277, 9124, 399, 129, 123}},
      {"\xCF\x93", {138, 225}},
      {"\xE2\xBE\x80" "0\xE2\xBE\x80" "1", {30590, 125, 17, 30590, 125, 18}},
      {"\xEF\xBD\x88\xEF\xBD\x94\xEF\xBD\x94\xEF\xBD\x90\xEF\xBD\x93\xEF\xBC\x9A\xEF\xBC\x8F\xEF"
       "\xBC\x8F\xEF\xBD\x85\xEF\xBD\x98\xEF\xBD\x81\xEF\xBD\x8D\xEF\xBD\x90\xEF\xBD\x8C\xEF\xBD"
       "\x85\xEF\xBC\x8E\xEF\xBD\x83\xEF\xBD\x8F\xEF\xBD\x8D",
       {3614, 1358, 11667, 15, 681}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(tok->encode(text), ids) << text;
}

TEST(BpeUnicode, Normalization) {
  using unicode::normalized;
  using unicode::NormalForm;
  EXPECT_EQ(normalized("e\xCC\x81", NormalForm::kNFC), "\xC3\xA9");
  EXPECT_EQ(normalized("\xE2\x84\xAB", NormalForm::kNFC), "\xC3\x85");      // U+212B -> U+00C5
  EXPECT_EQ(normalized("\xEF\xA4\x80", NormalForm::kNFC), "\xE8\xB1\x88");  // U+F900 -> U+8C48
  EXPECT_EQ(normalized("\xEF\xAC\x81", NormalForm::kNFC), "\xEF\xAC\x81");  // NFC keeps ligature
  EXPECT_EQ(normalized("\xEF\xAC\x81", NormalForm::kNFKC), "fi");
  // Hangul: L V T jamo compose to one syllable.
  EXPECT_EQ(normalized("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", NormalForm::kNFC), "\xEA\xB0\x81");
  // Canonical ordering: a + dot below (220) after acute (230) -> U+1EA1 + U+0301.
  EXPECT_EQ(normalized("a\xCC\x81\xCC\xA3", NormalForm::kNFC), "\xE1\xBA\xA1\xCC\x81");
  // Unicode 13's U+11935 U+11930 is not composed to U+11938: the reference's tables are 9.0.
  const std::string dives = "\xF0\x91\xA4\xB5\xF0\x91\xA4\xB0";
  EXPECT_EQ(normalized(dives, NormalForm::kNFC), dives);
  EXPECT_EQ(normalized("plain ascii", NormalForm::kNFKC), "plain ascii");
  // Regex classes are Unicode 16.0: Garay U+10D4A is a letter, U+1CCF0 a digit.
  EXPECT_EQ(unicode::char_class(0x10D4A), unicode::kLetter);
  EXPECT_EQ(unicode::char_class(0x1CCF0), unicode::kNumber);
  EXPECT_EQ(unicode::char_class(0x3000), unicode::kSpace);
  EXPECT_EQ(unicode::char_class(0x1C), unicode::kOther);
  EXPECT_EQ(unicode::char_class(0xFEFF), unicode::kOther);
  EXPECT_EQ(unicode::char_class(0x301), unicode::kOther);
}

// bpe/reject/: each variant of tiny_bpe_1k.json is refused with a message naming the field, except
// the two that wick reproduces exactly (NFKC normalizer, ignore_merges), which must give the
// reference's ids on the two samples.
TEST(BpeReject, EveryCase) {
  std::ifstream f(test::fixture("tokenizers/bpe/reject/cases.json"));
  const json cases = json::parse(f);
  const std::map<std::string, std::string> reason = {
      {"reject_merge_token_not_in_vocab.json", "model.merges[1000]"},
      {"reject_merge_result_not_in_vocab.json", "model.merges[1000]"},
      {"reject_merge_string_three_parts.json", "model.merges[5]"},
      {"reject_bpe_dropout.json", "model.dropout"},
      {"reject_continuing_subword_prefix.json", "model.continuing_subword_prefix"},
      {"reject_end_of_word_suffix.json", "model.end_of_word_suffix"},
      {"reject_byte_fallback.json", "model.byte_fallback"},
      {"reject_model_wordpiece.json", "model.type"},
      {"reject_pre_tokenizer_metaspace.json", "pre_tokenizer"},
      {"reject_pre_tokenizer_split_regex.json", "pre_tokenizer"},
      {"reject_normalizer_precompiled.json", "normalizer"},
      {"reject_unknown_pre_tokenizer_type.json", "ByteLevelX"},
      {"reject_duplicate_vocab_id.json", "model.vocab"},
      {"reject_added_token_id_collision.json", "added_tokens[2]"},
      {"reject_missing_byte_symbol.json", "byte 0x00"},
      {"reject_truncation_set.json", "truncation"},
      {"reject_padding_set.json", "padding"},
      {"reject_added_token_strip_flags.json", "added_tokens[0].lstrip"},
      {"reject_added_token_single_word.json", "added_tokens[0].single_word"},
  };
  const std::map<std::string, bool> supported = {
      {"reject_normalizer_nfkc.json", true},
      {"reject_ignore_merges_true.json", true},
  };
  std::vector<std::string> samples;
  for (const json& s : cases["samples"]) samples.push_back(s.get<std::string>());
  int seen = 0;
  for (const json& c : cases["cases"]) {
    ++seen;
    const std::string file = c["file"].get<std::string>();
    const std::string path = test::fixture("tokenizers/bpe/reject/" + file);
    if (supported.count(file)) {
      auto tok = BpeTokenizer::load(path);
      for (size_t i = 0; i < samples.size(); ++i) {
        EXPECT_EQ(tok->encode(samples[i]), ids_of(c["hf_ids"][i])) << file << " sample " << i;
      }
      continue;
    }
    auto it = reason.find(file);
    ASSERT_NE(it, reason.end()) << "no policy for " << file;
    try {
      BpeTokenizer::load(path);
      ADD_FAILURE() << file << " was loaded; it should be refused (" << c["why"] << ")";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(it->second), std::string::npos)
          << file << ": message does not name " << it->second << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(seen, 21);

  // Truncation and padding can be ignored on request; then encoding is the base file's.
  BpeOptions ignore;
  ignore.ignore_truncation_and_padding = true;
  for (const char* file : {"reject_truncation_set.json", "reject_padding_set.json"}) {
    auto tok = BpeTokenizer::load(test::fixture(std::string("tokenizers/bpe/reject/") + file),
                                  ignore);
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(tok->encode(samples[i]), ids_of(cases["base_ids"][i])) << file;
    }
  }
}

// More refusals, each a one-field change of tiny_bpe_1k.json.
TEST(BpeReject, MoreRefusals) {
  std::ifstream f(vocab_path("tiny_bpe_1k.json"));
  const json base = json::parse(f);
  struct Case {
    const char* name;
    void (*change)(json&);
    const char* names;  // what the message must mention
  };
  const Case cases[] = {
      {"decoder null", [](json& j) { j["decoder"] = nullptr; }, "`decoder`"},
      {"decoder WordPiece", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "WordPiece"},
      {"post_processor Roberta",
       [](json& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; }, "RobertaProcessing"},
      {"normalizer Sequence",
       [](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}}; },
       "`normalizer`"},
      {"pre_tokenizer null", [](json& j) { j["pre_tokenizer"] = nullptr; }, "`pre_tokenizer`"},
      {"use_regex false", [](json& j) { j["pre_tokenizer"]["use_regex"] = false; },
       "pre_tokenizer.use_regex"},
      {"added token twice",
       [](json& j) {
         json t = j["added_tokens"][1];
         t["content"] = "<|user|>";
         t["id"] = 1300;
         j["added_tokens"].push_back(t);
         t["id"] = 1301;
         j["added_tokens"].push_back(t);
       },
       "added_tokens[3].content"},
      {"merge as a number", [](json& j) { j["model"]["merges"][3] = 7; }, "model.merges[3]"},
      {"negative id", [](json& j) { j["model"]["vocab"]["il"] = -4; }, "model.vocab"},
      {"template without sequence",
       [](json& j) { j["post_processor"]["single"].erase(1); }, "post_processor.single"},
      {"template unknown special",
       [](json& j) { j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>"; },
       "post_processor.single[0]"},
  };
  for (const Case& c : cases) {
    json j = base;
    c.change(j);
    try {
      BpeTokenizer::load_from_json(j.dump(), "tiny-variant");
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(c.names), std::string::npos)
          << c.name << ": " << e.what();
    }
  }
  // The unchanged file loads.
  EXPECT_NO_THROW(BpeTokenizer::load_from_json(base.dump(), "tiny"));
}

// The word cache is per thread and per tokenizer: interleaving two tokenizers on several threads
// gives the ids each gives alone.
TEST(BpeTokenizer, ThreadsAndTwoTokenizers) {
  auto neox = BpeTokenizer::load(vocab_path("20B_tokenizer.json"));
  auto gpt2 = BpeTokenizer::load(vocab_path("gpt2_tokenizer.json"));
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> want_neox, want_gpt2;
  for (const json& r : read_jsonl("tokenizers/bpe/bpe_20B_expected.jsonl")) {
    texts.push_back(r["text"].get<std::string>());
    want_neox.push_back(ids_of(r["ids"]));
  }
  for (const json& r : read_jsonl("tokenizers/bpe/bpe_gpt2_expected.jsonl")) {
    want_gpt2.push_back(ids_of(r["ids"]));
  }
  ASSERT_EQ(texts.size(), want_gpt2.size());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = size_t(t); i < texts.size(); i += 2) {
        if (neox->encode(texts[i]) != want_neox[i]) ++bad;
        if (gpt2->encode(texts[i]) != want_gpt2[i]) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace wick

namespace wick {
namespace {

// Found by the tokenizer_json fuzzer: a number beyond double's range made nlohmann's parser
// throw out_of_range, which escaped as a non-wick exception. It is now a FormatError like any
// other invalid JSON.
TEST(BpeReject, NumberBeyondDoubleRangeIsInvalidJson) {
  for (const std::string text : {std::string("888888881.008888e881"),
                                 std::string("{\"model\": {\"type\": \"BPE\", \"x\": 1e999}}")}) {
    try {
      BpeTokenizer::load_from_json(text, "t.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace wick
