// UTF-8 helpers for the tokenizers: validation, replacement of ill-formed sequences with U+FFFD
// (the Unicode "maximal subpart" practice, same as Python's errors='replace'), and encoding of code
// points. Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wick::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// What starts at a position of a byte string.
enum class SeqKind {
  kValid,      // a complete, well-formed character of `length` bytes
  kInvalid,    // an ill-formed sequence; `length` bytes (its maximal subpart, >= 1) become one U+FFFD
  kTruncated,  // a well-formed prefix of a character that runs into the end of the input (1..3 bytes)
};
struct Seq {
  SeqKind kind;
  size_t length;
};

// Classifies the sequence starting at s[pos] (pos < s.size()).
Seq next_sequence(std::string_view s, size_t pos);

// Length of the longest prefix of s that is well-formed UTF-8 (stops before an invalid or truncated
// sequence).
size_t valid_prefix_length(std::string_view s);
inline bool is_valid(std::string_view s) { return valid_prefix_length(s) == s.size(); }

// Appends s to out with each maximal ill-formed subpart replaced by U+FFFD. With final = false a
// truncated sequence at the very end is left unconsumed (the caller keeps it for more bytes);
// with final = true it becomes one U+FFFD. Returns the number of bytes of s consumed.
size_t append_replacing_invalid(std::string_view s, std::string& out, bool final);

// Appends the UTF-8 form of code point cp (cp <= 0x10FFFF and not a surrogate; checked by the caller).
void append_code_point(std::string& out, char32_t cp);

}  // namespace wick::utf8
