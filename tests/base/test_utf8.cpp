// The one UTF-8 decoder (base/utf8.h): well-formed 1-4 byte characters and their code points,
// the ill-formed classes of Table 3-7 (overlongs, surrogates, beyond U+10FFFF, stray continuation
// bytes, bad continuations), truncated characters at the end of the input, the surrogatepass mode
// of the pickle reader and the manifest writer, the maximal-subpart replacement and the tail rule
// that utf8_boundary and StreamDecoder share.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "wick/generate.h"
#include "wick/tokenizer.h"

namespace wick::base::utf8 {
namespace {

Seq seq(std::string_view s, Surrogates mode = Surrogates::kRefuse) {
  return next_sequence(s, 0, mode);
}

TEST(Utf8, ValidOneToFourByteCharactersAndTheirCodePoints) {
  struct Case {
    std::string_view bytes;
    char32_t cp;
  };
  const Case cases[] = {
      {std::string_view("\0", 1), 0x0},
      {"A", 0x41},
      {"\x7F", 0x7F},
      {"\xC2\x80", 0x80},
      {"\xC3\xA9", 0xE9},
      {"\xDF\xBF", 0x7FF},
      {"\xE0\xA0\x80", 0x800},
      {"\xE6\x97\xA5", 0x65E5},
      {"\xED\x9F\xBF", 0xD7FF},
      {"\xEE\x80\x80", 0xE000},
      {"\xEF\xBF\xBD", 0xFFFD},
      {"\xEF\xBF\xBF", 0xFFFF},
      {"\xF0\x90\x80\x80", 0x10000},
      {"\xF0\x9F\x98\x80", 0x1F600},
      {"\xF4\x8F\xBF\xBF", 0x10FFFF},
  };
  for (const Case& c : cases) {
    const Seq q = seq(c.bytes);
    EXPECT_EQ(q.kind, SeqKind::kValid) << std::hex << uint32_t(c.cp);
    EXPECT_EQ(q.length, c.bytes.size()) << std::hex << uint32_t(c.cp);
    EXPECT_EQ(uint32_t(q.code_point), uint32_t(c.cp)) << std::hex << uint32_t(c.cp);
    size_t len = 0;
    EXPECT_EQ(uint32_t(decode_valid(reinterpret_cast<const unsigned char*>(c.bytes.data()), len)),
              uint32_t(c.cp));
    EXPECT_EQ(len, c.bytes.size());
    EXPECT_TRUE(is_valid(c.bytes));
    std::string encoded;
    append_code_point(encoded, c.cp);
    EXPECT_EQ(encoded, c.bytes) << std::hex << uint32_t(c.cp);
  }
}

TEST(Utf8, OverlongFormsAreInvalid) {
  // C0 / C1 can only start overlong 2-byte forms; E0 80..9F and F0 80..8F are overlong 3 / 4.
  for (std::string_view s : {"\xC0\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                             "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF"}) {
    EXPECT_EQ(seq(s).kind, SeqKind::kInvalid) << s.size();
    EXPECT_EQ(seq(s).length, 1u);  // the maximal subpart is the lead alone
    EXPECT_FALSE(is_valid(s));
    EXPECT_FALSE(is_valid(s, Surrogates::kAllow));
  }
}

TEST(Utf8, SurrogatesAreInvalidUnlessAllowed) {
  for (std::string_view s : {"\xED\xA0\x80", "\xED\xAF\xBF", "\xED\xB0\x80", "\xED\xBF\xBF"}) {
    EXPECT_EQ(seq(s).kind, SeqKind::kInvalid);
    EXPECT_EQ(seq(s).length, 1u);
    EXPECT_FALSE(is_valid(s));
    const Seq q = seq(s, Surrogates::kAllow);  // Python's surrogatepass
    EXPECT_EQ(q.kind, SeqKind::kValid);
    EXPECT_EQ(q.length, 3u);
    EXPECT_TRUE(is_valid(s, Surrogates::kAllow));
  }
  EXPECT_EQ(uint32_t(seq("\xED\xA0\x80", Surrogates::kAllow).code_point), 0xD800u);
  EXPECT_EQ(uint32_t(seq("\xED\xBF\xBF", Surrogates::kAllow).code_point), 0xDFFFu);
}

TEST(Utf8, NothingAboveU10FFFF) {
  for (std::string_view s :
       {"\xF4\x90\x80\x80", "\xF4\xBF\xBF\xBF", "\xF5\x80\x80\x80", "\xF7\xBF\xBF\xBF",
        "\xF8\x88\x80\x80\x80", "\xFC\x84\x80\x80\x80\x80", "\xFE", "\xFF"}) {
    EXPECT_EQ(seq(s).kind, SeqKind::kInvalid) << s.size();
    EXPECT_EQ(seq(s).length, 1u);
    EXPECT_FALSE(is_valid(s, Surrogates::kAllow));
  }
}

TEST(Utf8, StrayAndBrokenContinuationBytes) {
  EXPECT_EQ(seq("\x80").kind, SeqKind::kInvalid);
  EXPECT_EQ(seq("\xBF").kind, SeqKind::kInvalid);
  // A bad third or fourth byte ends the maximal subpart before it.
  EXPECT_EQ(seq("\xE6\x97"
                "A")
                .kind,
            SeqKind::kInvalid);
  EXPECT_EQ(seq("\xE6\x97"
                "A")
                .length,
            2u);
  EXPECT_EQ(seq("\xF0\x9F\x98"
                "A")
                .length,
            3u);
  EXPECT_EQ(seq("\xC3"
                "A")
                .length,
            1u);
  EXPECT_EQ(valid_prefix_length("ab\xC3\xA9\x80xyz"), 4u);
}

TEST(Utf8, TruncatedCharactersAtTheEnd) {
  struct Case {
    std::string_view bytes;
    size_t length;
  };
  for (const Case& c : {Case{"\xC3", 1}, Case{"\xE6", 1}, Case{"\xE6\x97", 2}, Case{"\xF0", 1},
                        Case{"\xF0\x9F", 2}, Case{"\xF0\x9F\x98", 3}, Case{"\xF4\x8F\xBF", 3}}) {
    const Seq q = seq(c.bytes);
    EXPECT_EQ(q.kind, SeqKind::kTruncated) << c.bytes.size();
    EXPECT_EQ(q.length, c.length);
    EXPECT_FALSE(is_valid(c.bytes));
    EXPECT_EQ(truncated_tail_start(c.bytes), 0u);
  }
  // A prefix that no byte can complete is invalid, not truncated.
  EXPECT_EQ(seq("\xE0\x80").kind, SeqKind::kInvalid);
  EXPECT_EQ(seq("\xED\xA0").kind, SeqKind::kInvalid);
  EXPECT_EQ(seq("\xED\xA0", Surrogates::kAllow).kind, SeqKind::kTruncated);
  EXPECT_EQ(seq("\xF4\x90").kind, SeqKind::kInvalid);
}

TEST(Utf8, TruncatedTailStartHoldsBackOnlyWhatCanStillComplete) {
  EXPECT_EQ(truncated_tail_start(""), 0u);
  EXPECT_EQ(truncated_tail_start("abc"), 3u);
  EXPECT_EQ(truncated_tail_start("a\xE6\x97\xA5"), 4u);  // whole
  EXPECT_EQ(truncated_tail_start("a\xE6\x97"), 1u);      // cut: held from its lead
  EXPECT_EQ(truncated_tail_start("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(truncated_tail_start("a\xFF"), 2u);             // never valid
  EXPECT_EQ(truncated_tail_start("a\x80"), 2u);             // stray continuation
  EXPECT_EQ(truncated_tail_start("a\xE0\x80"), 3u);         // overlong: invalid already
  EXPECT_EQ(truncated_tail_start("\x80\x80\x80\x80"), 4u);  // no lead in reach
  // The public form clamps the limit.
  EXPECT_EQ(utf8_boundary("a\xE6\x97\xA5", 3), 1u);
  EXPECT_EQ(utf8_boundary("a\xE6\x97\xA5", 99), 4u);
}

TEST(Utf8, ReplacementFollowsTheMaximalSubpartRule) {
  // The Unicode standard's own example (U+FFFD substitution, "best practice"): 8 replacements.
  EXPECT_EQ(utf8_replace_invalid("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d");
  EXPECT_EQ(utf8_replace_invalid("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string out;
  EXPECT_EQ(append_replacing_invalid("ok\xE6\x97", out, /*final=*/false), 2u);  // tail kept
  EXPECT_EQ(out, "ok");
  out.clear();
  EXPECT_EQ(append_replacing_invalid("ok\xE6\x97", out, /*final=*/true), 4u);
  EXPECT_EQ(out, "ok\xEF\xBF\xBD");
}

TEST(Utf8, LongAsciiRunsAndEveryTwoByteCharacter) {
  const std::string ascii(1000, 'x');
  EXPECT_EQ(valid_prefix_length(ascii + "\xC0"), 1000u);
  for (char32_t cp = 0x80; cp < 0x800; ++cp) {
    std::string s;
    append_code_point(s, cp);
    const Seq q = next_sequence(s, 0);
    ASSERT_EQ(q.kind, SeqKind::kValid);
    ASSERT_EQ(uint32_t(q.code_point), uint32_t(cp));
  }
}

}  // namespace
}  // namespace wick::base::utf8
