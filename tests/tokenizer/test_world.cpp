// World tokenizer: vocabulary parsing (spot checks, a checksum over the whole table, crafted bad
// files), id-for-id parity with the reference on every fixture text and byte string, decoding.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"
#include "base/utf8.h"
#include "tokenizer/world_tokenizer.h"
#include "wick/errors.h"
#include "wick/tokenizer.h"

namespace {

using wick::WorldTokenizer;
using json = nlohmann::json;
using wick::test::read_jsonl;
using wick::test::from_hex;

std::string to_hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

const WorldTokenizer& world() {
  static const std::unique_ptr<WorldTokenizer> tok =
      WorldTokenizer::load(wick::test::fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  return *tok;
}

std::vector<int32_t> ids_of(const json& j) { return j.get<std::vector<int32_t>>(); }

TEST(WorldTokenizer, LoadsStandardVocab) {
  const WorldTokenizer& t = world();
  EXPECT_EQ(t.token_count(), 65529u);
  EXPECT_EQ(t.vocab_size(), 65530);  // one past the largest id in the file
  EXPECT_EQ(t.name(), "world");
  auto generic = wick::load_world_tokenizer(
      wick::test::fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  EXPECT_EQ(generic->name(), "world");
  EXPECT_EQ(generic->encode("Hello, world!"), (std::vector<int32_t>{33155, 45, 40213, 34}));
}

TEST(WorldTokenizer, SpotChecks) {
  const WorldTokenizer& t = world();
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(t.token_bytes(b + 1), std::string(1, static_cast<char>(b))) << "id " << b + 1;
  }
  EXPECT_EQ(t.token_bytes(205), "\xCC");
  EXPECT_EQ(t.token_bytes(129), "\x80");
  EXPECT_EQ(t.token_bytes(2423), "\xC2\x80");  // '\x80' in a str literal is U+0080
  EXPECT_EQ(t.token_bytes(2430), "\xC2\xA0");
  EXPECT_EQ(t.token_bytes(2672), "\xCC\x81");  // combining mark right after the quote
  EXPECT_EQ(t.token_bytes(2676), "\xCC\x88");
  EXPECT_EQ(t.token_bytes(9804), "\xE2\x80\x82");
  EXPECT_EQ(t.token_bytes(9808), "\xE2\x80\x8B");  // '\u200b'
  EXPECT_EQ(t.token_bytes(10078), "\xE3\x80\x80");
  EXPECT_EQ(t.token_bytes(19125), "\xEF\xBB\xBF");
  EXPECT_EQ(t.token_bytes(33), " ");
  EXPECT_EQ(t.token_bytes(65529), std::string(128, ' '));
  EXPECT_EQ(t.token_bytes(0), "");
  EXPECT_EQ(t.token_bytes(65530), "");
  EXPECT_EQ(t.encode("\n\n"), std::vector<int32_t>{261});
  EXPECT_EQ(t.encode("\n"), std::vector<int32_t>{11});
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(t.encode("Internationalizatio"), (std::vector<int32_t>{64762, 7945, 2210, 112}));
  EXPECT_EQ(t.encode("<|endoftext|>"), (std::vector<int32_t>{61, 125, 25258, 7588, 2318, 125, 63}));
  EXPECT_EQ(t.encode(std::string("\0\0", 2)), (std::vector<int32_t>{1, 1}));
}

// FNV-1a 64 over (id as 4 bytes LE, length as 4 bytes LE, bytes) for every line, computed
// independently with Python's ast.literal_eval on the same file.
TEST(WorldTokenizer, WholeTableChecksum) {
  const WorldTokenizer& t = world();
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](unsigned char b) {
    h ^= b;
    h *= 0x100000001b3ull;
  };
  size_t seen = 0;
  for (int32_t id = 1; id < t.vocab_size(); ++id) {
    std::string_view b = t.token_bytes(id);
    if (b.empty()) continue;
    ++seen;
    for (int k = 0; k < 4; ++k) mix(static_cast<unsigned char>(static_cast<uint32_t>(id) >> (8 * k)));
    for (int k = 0; k < 4; ++k) mix(static_cast<unsigned char>(b.size() >> (8 * k)));
    for (unsigned char c : b) mix(c);
  }
  EXPECT_EQ(seen, 65529u);
  EXPECT_EQ(h, 0x5051c95515dafe6eull);
}

TEST(WorldTokenizer, EveryTokenEncodesToItself) {
  const WorldTokenizer& t = world();
  size_t bad = 0;
  for (int32_t id = 1; id < t.vocab_size(); ++id) {
    std::vector<int32_t> ids = t.encode(t.token_bytes(id));
    if (ids != std::vector<int32_t>{id} && ++bad < 5) ADD_FAILURE() << "id " << id;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(WorldTokenizer, CorpusParity) {
  const WorldTokenizer& t = world();
  const auto rows = read_jsonl("tokenizers/world/world_expected.jsonl");
  ASSERT_EQ(rows.size(), 1884u);
  size_t mismatches = 0;
  for (const json& r : rows) {
    const std::string text = r.at("text").get<std::string>();
    const std::vector<int32_t> expected = ids_of(r.at("ids"));
    const std::vector<int32_t> got = t.encode(text);
    if (got != expected) {
      if (++mismatches <= 5) ADD_FAILURE() << "encode mismatch for " << r.at("id");
      continue;
    }
    if (t.decode(got) != text) {
      if (++mismatches <= 5) ADD_FAILURE() << "round trip failed for " << r.at("id");
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << rows.size();
}

TEST(WorldTokenizer, ByteStringParity) {
  const WorldTokenizer& t = world();
  const auto rows = read_jsonl("tokenizers/world/world_bytes_expected.jsonl");
  ASSERT_EQ(rows.size(), 695u);
  size_t mismatches = 0;
  for (const json& r : rows) {
    const std::string bytes = from_hex(r.at("hex").get<std::string>());
    const std::vector<int32_t> got = t.encode(bytes);
    if (got != ids_of(r.at("ids")) || t.decode(got) != bytes) {
      if (++mismatches <= 5) ADD_FAILURE() << "mismatch for " << r.at("id");
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << rows.size();
}

TEST(WorldTokenizer, DecodeFixture) {
  const WorldTokenizer& t = world();
  const auto rows = read_jsonl("tokenizers/world/world_decode_expected.jsonl");
  ASSERT_EQ(rows.size(), 123u);
  for (const json& r : rows) {
    SCOPED_TRACE(r.at("id").get<std::string>());
    const std::vector<int32_t> ids = ids_of(r.at("ids"));
    if (r.at("hex").is_null()) {
      // The reference has no bytes for these ids. Here 0 (end of text) decodes to nothing and
      // any other id outside the file is an error.
      bool all_known = true;
      std::string expected;
      for (int32_t id : ids) {
        if (id == 0) continue;
        if (t.token_bytes(id).empty()) all_known = false;
        expected += t.token_bytes(id);
      }
      if (all_known) {
        EXPECT_EQ(t.decode(ids), expected);
      } else {
        EXPECT_THROW(t.decode(ids), wick::InputError);
      }
      continue;
    }
    const std::string bytes = t.decode(ids);
    EXPECT_EQ(to_hex(bytes), r.at("hex").get<std::string>());
    EXPECT_EQ(wick::base::utf8::is_valid(bytes), r.at("valid_utf8").get<bool>());
    EXPECT_EQ(wick::utf8_replace_invalid(bytes), r.at("text_replace").get<std::string>());
  }
}

TEST(WorldTokenizer, DecodeRejectsUnknownIds) {
  const WorldTokenizer& t = world();
  for (int32_t id : {-1, 65530, 65535, 65536, INT32_MAX, INT32_MIN}) {
    const std::vector<int32_t> ids{34550, id};
    try {
      t.decode(ids);
      ADD_FAILURE() << "no error for id " << id;
    } catch (const wick::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(id)), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(t.decode(std::vector<int32_t>{0, 34550, 0}), "hello");
}

TEST(WorldTokenizer, CrlfVocabLoadsTheSame) {
  const std::string text =
      wick::test::read_file(wick::test::fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  std::string crlf;
  crlf.reserve(text.size() + 70000);
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  const auto path = wick::test::scratch_dir() / "crlf_vocab.txt";
  wick::test::write_file(path, crlf);
  const auto t = WorldTokenizer::load(path.string());
  ASSERT_EQ(t->vocab_size(), world().vocab_size());
  for (int32_t id = 0; id < t->vocab_size(); ++id) {
    ASSERT_EQ(t->token_bytes(id), world().token_bytes(id)) << "id " << id;
  }
}

TEST(WorldTokenizer, MissingFileIsFileError) {
  const auto path = wick::test::scratch_dir() / "no_such_vocab.txt";
  EXPECT_THROW(WorldTokenizer::load(path.string()), wick::FileError);
}

// A minimal valid vocabulary: the 256 single bytes as ids 1..256 (lines 1..256).
std::string byte_lines(int skip_byte = -1) {
  std::string s;
  char buf[32];
  for (int b = 0; b < 256; ++b) {
    if (b == skip_byte) continue;
    std::snprintf(buf, sizeof buf, "%d b'\\x%02x' 1\n", b + 1, b);
    s += buf;
  }
  return s;
}

TEST(WorldTokenizer, SmallCraftedVocab) {
  const std::string vocab = byte_lines() +
                            "257 'ab' 2\r\n"
                            "258 \"it's\" 4\n"
                            "259 b'\\x80\\x81' 2\n"
                            "300 '\\xa0\\u200b\\U0001F600' 9\n"
                            "301 'a b \\'\\\\\\t' 7\n"
                            "302 'é́' 4";  // no final newline
  const auto path = wick::test::scratch_dir() / "small.txt";
  wick::test::write_file(path, vocab);
  const auto t = WorldTokenizer::load(path.string());
  EXPECT_EQ(t->vocab_size(), 303);
  EXPECT_EQ(t->token_count(), 262u);
  EXPECT_EQ(t->token_bytes(258), "it's");
  EXPECT_EQ(t->token_bytes(259), "\x80\x81");
  EXPECT_EQ(t->token_bytes(300), "\xC2\xA0\xE2\x80\x8B\xF0\x9F\x98\x80");
  EXPECT_EQ(t->token_bytes(301), "a b '\\\t");
  EXPECT_EQ(t->token_bytes(302), "\xC3\xA9\xCC\x81");
  EXPECT_EQ(t->encode("abab\x80\x81it's"), (std::vector<int32_t>{257, 257, 259, 258}));
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{257, 100}));
  EXPECT_THROW(t->decode(std::vector<int32_t>{299}), wick::InputError);  // a gap in the ids
  EXPECT_THROW(t->decode(std::vector<int32_t>{303}), wick::InputError);
}

struct BadCase {
  const char* name;
  std::string vocab;
  std::string where;  // expected in the message ("line 257", or the byte)
};

TEST(WorldTokenizer, BadVocabFilesAreFormatErrors) {
  const std::string base = byte_lines();
  const std::vector<BadCase> cases = {
      {"length mismatch", base + "257 'ab' 3\n", "line 257"},
      {"str \\x is a code point", base + "257 '\\xa0' 1\n", "line 257"},
      {"no closing quote", base + "257 'ab 2\n", "line 257"},
      {"no quotes", base + "257 ab 2\n", "line 257"},
      {"unknown escape", base + "257 'a\\qb' 3\n", "line 257"},
      {"short hex escape", base + "257 'a\\x4' 2\n", "line 257"},
      {"bad hex digit", base + "257 'a\\x4g' 2\n", "line 257"},
      {"\\u in bytes", base + "257 b'\\u0041' 1\n", "line 257"},
      {"surrogate", base + "257 '\\ud800' 3\n", "line 257"},
      {"above U+10FFFF", base + "257 '\\U00110000' 4\n", "line 257"},
      {"trailing backslash", base + "257 'a\\' 2\n", "line 257"},
      {"unescaped quote", base + "257 'a'b' 3\n", "line 257"},
      {"non-ASCII in bytes", base + "257 b'\xC3\xA9' 2\n", "line 257"},
      {"invalid UTF-8 in str", base + "257 '\xFF' 1\n", "line 257"},
      {"one space only", base + "257 'ab'\n", "line 257"},
      {"no space", base + "257\n", "line 257"},
      {"empty line", base + "\n257 'ab' 2\n", "line 257"},
      {"bad id", base + "x57 'ab' 2\n", "line 257"},
      {"negative id", base + "-257 'ab' 2\n", "line 257"},
      {"bad length", base + "257 'ab' 2x\n", "line 257"},
      {"trailing space", base + "257 'ab' 2 \n", "line 257"},
      {"duplicate id", base + "256 'ab' 2\n", "line 257"},
      {"ids out of order", base + "300 'ab' 2\n299 'cd' 2\n", "line 258"},
      {"duplicate bytes", base + "257 'a' 1\n", "line 257"},
      {"duplicate bytes, other form", base + "257 'ab' 2\n258 b'ab' 2\n", "line 258"},
      {"empty token", base + "257 '' 0\n", "line 257"},
      {"id 0", "0 'ab' 2\n" + base, "line 1"},
      {"huge id", base + "99999999999 'ab' 2\n", "line 257"},
      {"missing single byte", byte_lines(0x41) + "257 'ab' 2\n", "0x41"},
      {"empty file", "", "0x00"},
  };
  const auto dir = wick::test::scratch_dir();
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir / "bad.txt";
    wick::test::write_file(path, c.vocab);
    try {
      WorldTokenizer::load(path.string());
      ADD_FAILURE() << "loaded without error";
    } catch (const wick::FormatError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.path(), path.string());
      EXPECT_NE(msg.find(c.where), std::string::npos) << msg;
    }
  }
}

}  // namespace
