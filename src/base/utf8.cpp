// The UTF-8 decoder (base/utf8.h).
#include "base/utf8.h"

#include <cstdint>
#include <cstring>

namespace wick::base::utf8 {

namespace {

inline bool is_cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Number of leading bytes of s[pos..] (at most 8 at a time) that are ASCII, skipping whole words.
inline size_t ascii_run(const unsigned char* p, size_t n, size_t pos) {
  size_t i = pos;
  while (i + 8 <= n) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i - pos;
}

}  // namespace

Seq next_sequence(std::string_view s, size_t pos, Surrogates surrogates) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char b = p[pos];
  if (b < 0x80) return {SeqKind::kValid, 1, b};
  // Table 3-7 of the Unicode standard: the allowed range of the second byte depends on the lead.
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;                                       // no overlongs
    if (b == 0xED && surrogates == Surrogates::kRefuse) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;  // no overlongs
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {SeqKind::kInvalid, 1};  // 80..C1 (continuation, overlong lead), F5..FF
  }
  if (pos + 1 >= n) return {SeqKind::kTruncated, 1};
  if (p[pos + 1] < lo || p[pos + 1] > hi) return {SeqKind::kInvalid, 1};
  for (size_t k = 2; k < need; ++k) {
    if (pos + k >= n) return {SeqKind::kTruncated, k};
    if (!is_cont(p[pos + k])) return {SeqKind::kInvalid, k};
  }
  size_t length;
  const char32_t cp = decode_valid(p + pos, length);
  return {SeqKind::kValid, need, cp};
}

size_t valid_prefix_length(std::string_view s, Surrogates surrogates) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    i += ascii_run(p, s.size(), i);
    if (i >= s.size()) break;
    Seq q = next_sequence(s, i, surrogates);
    if (q.kind != SeqKind::kValid) break;
    i += q.length;
  }
  return i;
}

size_t truncated_tail_start(std::string_view s) {
  const size_t n = s.size();
  // A truncated sequence is at most 3 bytes: its lead is among the last 3, and it is the last byte
  // there that is not a continuation byte.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    if (is_cont(static_cast<unsigned char>(s[i]))) continue;
    return next_sequence(s, i).kind == SeqKind::kTruncated ? i : n;
  }
  return n;
}

size_t append_replacing_invalid(std::string_view s, std::string& out, bool final) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  size_t run = 0;  // start of the current stretch of valid bytes not yet copied
  while (i < n) {
    i += ascii_run(p, n, i);
    if (i >= n) break;
    Seq q = next_sequence(s, i);
    if (q.kind == SeqKind::kValid) {
      i += q.length;
      continue;
    }
    out.append(s.data() + run, i - run);
    if (q.kind == SeqKind::kTruncated && !final) return i;  // keep the tail for later
    out.append(kReplacement);
    i += q.length;
    run = i;
  }
  out.append(s.data() + run, n - run);
  return n;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace wick::base::utf8
