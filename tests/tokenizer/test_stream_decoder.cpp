// UTF-8 replacement (utf8_replace_invalid) and the streaming decoder (StreamDecoder): the
// replacement rule against Python's errors='replace' and the fixtures' decoded texts; streaming
// every corpus text one token at a time (World and byte-level) equals decoding it whole.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "base/utf8.h"
#include "tokenizer/world_tokenizer.h"
#include "wick/errors.h"
#include "wick/tokenizer.h"

namespace {

using json = nlohmann::json;
using wick::test::read_jsonl;
using wick::test::from_hex;
using namespace std::string_literals;

const std::string kFFFD = "\xEF\xBF\xBD";

const wick::WorldTokenizer& world() {
  static const std::unique_ptr<wick::WorldTokenizer> tok = wick::WorldTokenizer::load(
      wick::test::fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  return *tok;
}

// Streams `ids` through a StreamDecoder; checks that every piece is valid UTF-8 and that at most a
// partial character (<= 3 bytes) is ever held back. Returns all pieces plus the flush.
std::string stream(const wick::Tokenizer& tok, const std::vector<int32_t>& ids) {
  wick::StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = dec.push(id);
    EXPECT_TRUE(wick::base::utf8::is_valid(piece));
    EXPECT_LE(dec.pending_bytes(), 3u);
    out += piece;
  }
  std::string tail = dec.flush();
  EXPECT_TRUE(wick::base::utf8::is_valid(tail));
  EXPECT_EQ(dec.pending_bytes(), 0u);
  return out + tail;
}

std::vector<int32_t> byte_ids(std::string_view s) { return wick::ByteTokenizer().encode(s); }

// Expected outputs from Python 3: bytes.fromhex(...).decode('utf-8', errors='replace').
TEST(Utf8, ReplaceInvalidMatchesPython) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},
      {"\x41", "\x41"},
      {"\x80", "\xef\xbf\xbd"},
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xc1\xbf", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe0\xa0\x80", "\xe0\xa0\x80"},
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xed\x9f\xbf", "\xed\x9f\xbf"},
      {"\xed\xbf\xbf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf0\x90\x80\x80", "\xf0\x90\x80\x80"},
      {"\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"},
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xf5", "\xef\xbf\xbd"},
      {"\xff", "\xef\xbf\xbd"},
      {"\xfe", "\xef\xbf\xbd"},
      {"\xe4\xb8", "\xef\xbf\xbd"},
      {"\xe4\xb8\x41", "\xef\xbf\xbd\x41"},
      {"\xf0\x9f\x98", "\xef\xbf\xbd"},
      {"\xf0\x9f\x98\x41", "\xef\xbf\xbd\x41"},
      {"\xf0\x9f\x98\xf0\x9f\x98\x80", "\xef\xbf\xbd\xf0\x9f\x98\x80"},
      {"\xc2", "\xef\xbf\xbd"},
      {"\xc2\x41", "\xef\xbf\xbd\x41"},
      {"\x80\xbf\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xe4\xe4", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"\xcf\xe4\xb8\xad", "\xef\xbf\xbd\xe4\xb8\xad"},
      {"\xef\xbf\xbd", "\xef\xbf\xbd"},
      {"\xf4", "\xef\xbf\xbd"},
      {"\xe1\x80\x80\x80", "\xe1\x80\x80\xef\xbf\xbd"},
      {"\x6f\x6b\x20\xe4\xb8", "\x6f\x6b\x20\xef\xbf\xbd"},
      {"\xe0\xa0", "\xef\xbf\xbd"},
      {"\xf0\x90", "\xef\xbf\xbd"},
      {"\xf0\xa0\xa0", "\xef\xbf\xbd"},
      {"\x41\xc0", "\x41\xef\xbf\xbd"},
      {"\xed", "\xef\xbf\xbd"},
      {"\xed\xa0", "\xef\xbf\xbd\xef\xbf\xbd"},
      {"a\0b"s, "a\0b"s},
      {"0123456789abcdef\xff" "0123456789abcdef"s, "0123456789abcdef\xef\xbf\xbd" "0123456789abcdef"s},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(wick::utf8_replace_invalid(in), want) << "input bytes: " << testing::PrintToString(in);
    EXPECT_EQ(wick::base::utf8::is_valid(in), in == want);
    // The streaming decoder gives the same, fed byte by byte.
    EXPECT_EQ(stream(wick::ByteTokenizer(), byte_ids(in)), want);
  }
}

TEST(Utf8, ValidCorpusUnchanged) {
  const auto rows = read_jsonl("tokenizers/corpus.jsonl");
  ASSERT_GT(rows.size(), 1000u);
  for (const json& r : rows) {
    const std::string text = r.at("text").get<std::string>();
    ASSERT_TRUE(wick::base::utf8::is_valid(text)) << r.at("id");
    ASSERT_EQ(wick::utf8_replace_invalid(text), text) << r.at("id");
  }
}

// The byte-level BPE decoder: each character of a token string stands for one byte; a token with a
// character outside that alphabet (an added token such as a run of spaces) stands for its own UTF-8.
std::string bytes_of_bpe_token(const std::string& token) {
  static const std::map<char32_t, unsigned char> alphabet = [] {
    std::map<char32_t, unsigned char> m;
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      m[self ? static_cast<char32_t>(b) : next++] = static_cast<unsigned char>(b);
    }
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) cp = cp << 6 | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    i += len;
    auto it = alphabet.find(cp);
    if (it == alphabet.end()) return token;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

// HF tokenizers' decoded texts (Rust from_utf8_lossy) follow the same replacement rule.
TEST(Utf8, MatchesBpeDecodeFixtures) {
  size_t checked = 0;
  for (const char* file : {"tokenizers/bpe/bpe_20B_decode_expected.jsonl",
                           "tokenizers/bpe/bpe_gpt2_decode_expected.jsonl"}) {
    for (const json& r : read_jsonl(file)) {
      if (r.value("out_of_range", false)) continue;
      std::string bytes;
      for (const auto& t : r.at("tokens")) bytes += bytes_of_bpe_token(t.get<std::string>());
      const std::string want = r.at("decoded").get<std::string>();
      EXPECT_EQ(wick::utf8_replace_invalid(bytes), want) << file << " " << r.at("id");
      EXPECT_EQ(stream(wick::ByteTokenizer(), byte_ids(bytes)), want) << file << " " << r.at("id");
      ++checked;
    }
  }
  EXPECT_GT(checked, 300u);
}

TEST(StreamDecoder, HoldsSplitCharacterUntilComplete) {
  wick::ByteTokenizer bt;
  wick::StreamDecoder dec(bt);
  EXPECT_EQ(dec.push('a'), "a");
  EXPECT_EQ(dec.push(0xE4), "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(dec.push(0xB8), "");
  EXPECT_EQ(dec.push(0xAD), "\xE4\xB8\xAD");  // 中
  EXPECT_EQ(dec.push(0xD0), "");
  EXPECT_EQ(dec.push(0x9F), "\xD0\x9F");  // П
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push(0x9F), "");
  EXPECT_EQ(dec.push(0x98), "");
  EXPECT_EQ(dec.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, WorldCharacterSplitOverTokens) {
  // "こんにちは" byte by byte through World single-byte ids (byte + 1).
  const std::string text = "\xE3\x81\x93\xE3\x82\x93";
  wick::StreamDecoder dec(world());
  std::string out;
  std::vector<size_t> sizes;
  for (unsigned char c : text) {
    std::string piece = dec.push(static_cast<int32_t>(c) + 1);
    sizes.push_back(piece.size());
    out += piece;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{0, 0, 3, 0, 0, 3}));
  EXPECT_EQ(out + dec.flush(), text);
  // Id 0 (end of text) adds nothing and keeps what is held back.
  EXPECT_EQ(dec.push(229), "");  // E4
  EXPECT_EQ(dec.push(0), "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
}

TEST(StreamDecoder, InvalidBytesReplacedAsSoonAsKnown) {
  wick::ByteTokenizer bt;
  wick::StreamDecoder dec(bt);
  EXPECT_EQ(dec.push(0xFF), kFFFD);
  EXPECT_EQ(dec.push(0xE4), "");
  EXPECT_EQ(dec.push('a'), kFFFD + "a");
  EXPECT_EQ(dec.push(0xED), "");
  EXPECT_EQ(dec.push(0xA0), kFFFD + kFFFD);  // encoded surrogate: known bad at its second byte
  EXPECT_EQ(dec.push(0x80), kFFFD);
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push(0x9F), "");
  EXPECT_EQ(dec.flush(), kFFFD);  // an incomplete tail at the end is one U+FFFD
  // The decoder starts afresh after flush().
  EXPECT_EQ(dec.push('b'), "b");
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, UnknownIdThrowsAndKeepsState) {
  wick::StreamDecoder dec(world());
  EXPECT_EQ(dec.push(229), "");   // E4
  EXPECT_EQ(dec.push(186), "");   // B9
  EXPECT_THROW(dec.push(65530), wick::InputError);
  EXPECT_THROW(dec.push(-1), wick::InputError);
  EXPECT_EQ(dec.pending_bytes(), 2u);
  EXPECT_EQ(dec.push(174), "\xE4\xB9\xAD");
  wick::ByteTokenizer bt;
  wick::StreamDecoder bdec(bt);
  EXPECT_THROW(bdec.push(256), wick::InputError);
}

TEST(StreamDecoder, WorldCorpusOneTokenAtATime) {
  const wick::WorldTokenizer& t = world();
  const auto rows = read_jsonl("tokenizers/world/world_expected.jsonl");
  ASSERT_EQ(rows.size(), 1884u);
  size_t held = 0;
  for (const json& r : rows) {
    const std::string text = r.at("text").get<std::string>();
    const auto ids = r.at("ids").get<std::vector<int32_t>>();
    ASSERT_EQ(stream(t, ids), text) << r.at("id");
    // Count texts where a character really is split over tokens (the case streaming is for).
    wick::StreamDecoder dec(t);
    for (int32_t id : ids) {
      dec.push(id);
      if (dec.pending_bytes() > 0) {
        ++held;
        break;
      }
    }
  }
  EXPECT_GT(held, 50u);
}

TEST(StreamDecoder, ByteTokenizerCorpusOneByteAtATime) {
  wick::ByteTokenizer bt;
  const auto rows = read_jsonl("tokenizers/corpus.jsonl");
  for (const json& r : rows) {
    const std::string text = r.at("text").get<std::string>();
    ASSERT_EQ(stream(bt, byte_ids(text)), text) << r.at("id");
  }
}

TEST(StreamDecoder, InvalidByteStringsMatchWholeDecode) {
  const wick::WorldTokenizer& t = world();
  wick::ByteTokenizer bt;
  for (const json& r : read_jsonl("tokenizers/world/world_bytes_expected.jsonl")) {
    const std::string bytes = from_hex(r.at("hex").get<std::string>());
    const std::string want = wick::utf8_replace_invalid(bytes);
    ASSERT_EQ(stream(t, r.at("ids").get<std::vector<int32_t>>()), want) << r.at("id");
    ASSERT_EQ(stream(bt, byte_ids(bytes)), want) << r.at("id");
  }
  for (const json& r : read_jsonl("tokenizers/world/world_decode_expected.jsonl")) {
    if (r.at("hex").is_null()) continue;
    ASSERT_EQ(stream(t, r.at("ids").get<std::vector<int32_t>>()),
              r.at("text_replace").get<std::string>())
        << r.at("id");
  }
}

// Seeded random byte strings biased towards (broken) multi-byte sequences, streamed in random
// chunks through the byte tokenizer and compared with the whole-string replacement.
TEST(StreamDecoder, RandomBytesMatchWholeDecode) {
  std::mt19937 rng(7);
  const unsigned char interesting[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                       0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1,
                                       0xF3, 0xF4, 0xF5, 0xFF};
  wick::ByteTokenizer bt;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) {
      c = static_cast<char>(rng() % 2 ? interesting[rng() % sizeof interesting] : rng() % 256);
    }
    const std::string want = wick::utf8_replace_invalid(s);
    ASSERT_TRUE(wick::base::utf8::is_valid(want));
    ASSERT_EQ(stream(bt, byte_ids(s)), want) << testing::PrintToString(s);
  }
}

}  // namespace
