// The one UTF-8 decoder of wick: every layer that validates, decodes, repairs or cuts UTF-8 text
// (the tokenizers, the streaming decoders, the evaluation-text reader, the pickle reader, the
// `.rwkvq` manifest writer) goes through these functions. Pure functions; safe from any thread.
//
// Well-formed UTF-8 is Table 3-7 of the Unicode standard: no overlong forms (C0, C1, E0 80..9F,
// F0 80..8F), no encoded surrogates (ED A0..BF) unless Surrogates::kAllow is asked for, nothing
// above U+10FFFF (F4 90..BF, F5..FF). An ill-formed sequence is measured by its "maximal subpart"
// (the Unicode best practice, as Python's errors='replace', WHATWG and Rust's from_utf8_lossy do):
// the longest prefix that could still begin a well-formed character, at least one byte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wick::base::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Whether encoded surrogate code points (U+D800..U+DFFF as ED A0..BF xx) count as characters.
enum class Surrogates {
  kRefuse,  // Unicode UTF-8 (the default everywhere text is text)
  kAllow,   // Python's "surrogatepass": what a pickle's strings and json.dumps may carry
};

// What starts at a position of a byte string.
enum class SeqKind {
  kValid,      // a complete, well-formed character of `length` bytes
  kInvalid,    // ill-formed; `length` bytes (its maximal subpart, >= 1) become one U+FFFD
  kTruncated,  // a well-formed prefix of a character cut by the end of the input (1..3 bytes)
};
struct Seq {
  SeqKind kind;
  size_t length;
  char32_t code_point = 0;  // the character's code point when kind == kValid, else 0
};

// Classifies the sequence starting at s[pos] (pos < s.size()).
Seq next_sequence(std::string_view s, size_t pos, Surrogates surrogates = Surrogates::kRefuse);

// Length of the longest prefix of s that is well-formed UTF-8 (stops before an invalid or truncated
// sequence).
size_t valid_prefix_length(std::string_view s, Surrogates surrogates = Surrogates::kRefuse);
inline bool is_valid(std::string_view s, Surrogates surrogates = Surrogates::kRefuse) {
  return valid_prefix_length(s, surrogates) == s.size();
}

// Where a character cut off by the end of s begins: the start of the truncated sequence
// (kTruncated) that ends s, or s.size() when s ends on a whole character or on bytes that are
// invalid whatever follows. Looks back at most 3 bytes, so s.size() - result <= 3, and ASCII is
// never held back.
size_t truncated_tail_start(std::string_view s);

// Appends s to out with each maximal ill-formed subpart replaced by U+FFFD. With final = false a
// truncated sequence at the very end is left unconsumed (the caller keeps it for more bytes);
// with final = true it becomes one U+FFFD. Returns the number of bytes of s consumed.
size_t append_replacing_invalid(std::string_view s, std::string& out, bool final);

// Appends the UTF-8 form of code point cp (<= 0x10FFFF, not a surrogate: the caller checks).
void append_code_point(std::string& out, char32_t cp);

// The code point of the character at p[0] and its length (1..4) in `length`, for text already known
// to be valid (is_valid, valid_prefix_length): nothing is checked, and the lead byte alone decides
// how many bytes are read. The tokenizers' inner loops use it.
inline char32_t decode_valid(const unsigned char* p, size_t& length) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    length = 2;
    return (char32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (b0 < 0xF0) {
    length = 3;
    return (char32_t(b0 & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  length = 4;
  return (char32_t(b0 & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

}  // namespace wick::base::utf8
