#include "tokenizer/world_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <type_traits>
#include <utility>

#include "base/utf8.h"
#include "wick/errors.h"

namespace wick {

namespace {

// Sanity limit on ids (the decoding table has one entry per id up to the largest).
constexpr uint32_t kMaxId = (1u << 24) - 1;

// A line of the file shown in an error message: control bytes and non-UTF-8 bytes as \xHH, cut
// after 80 bytes.
std::string show(std::string_view s) {
  constexpr size_t kMax = 80;
  const bool cut = s.size() > kMax;
  if (cut) s = s.substr(0, kMax);
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    base::utf8::Seq q = base::utf8::next_sequence(s, i);
    if (c >= 0x80 && q.kind == base::utf8::SeqKind::kValid) {
      out.append(s.substr(i, q.length));
      i += q.length;
      continue;
    }
    if (c < 0x20 || c >= 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  out += cut ? "\"..." : "\"";
  return out;
}

std::string hex_byte(unsigned v) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("0x") + hex[(v >> 4) & 15] + hex[v & 15];
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One parsed line: the token's bytes live in the tokenizer's blob at [offset, offset + length).
struct Entry {
  uint32_t id;
  uint32_t offset;
  uint32_t length;
  size_t line;
};

class VocabParser {
 public:
  VocabParser(const std::string& path, std::string& blob) : path_(path), blob_(blob) {}

  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw FormatError(path_, "", expected + " on line " + std::to_string(line_no_), found);
  }

  // Decimal number of at most 10 digits; -1 if `s` is not one.
  static int64_t parse_decimal(std::string_view s) {
    if (s.empty() || s.size() > 10) return -1;
    int64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      v = v * 10 + (c - '0');
    }
    return v;
  }

  // Decodes a Python str/bytes literal and appends the token bytes to blob_.
  void decode_literal(std::string_view lit) {
    bool bytes_mode = false;
    size_t k = 0;
    if (!lit.empty() && lit[0] == 'b') {
      bytes_mode = true;
      k = 1;
    }
    if (lit.size() < k + 2 || (lit[k] != '\'' && lit[k] != '"') || lit.back() != lit[k]) {
      fail("a Python literal '...', \"...\" or b'...' between the first and the last space",
           show(lit));
    }
    const char quote = lit[k];
    const std::string_view body = lit.substr(k + 1, lit.size() - k - 2);
    const size_t start = blob_.size();
    for (size_t i = 0; i < body.size(); ++i) {
      const char c = body[i];
      if (c == quote) {
        fail(std::string("no unescaped ") + quote + " inside the literal", show(lit));
      }
      if (c != '\\') {
        if (bytes_mode && (static_cast<unsigned char>(c) >= 0x80 || c == '\n' || c == '\r')) {
          fail("only ASCII characters or escapes inside a b'...' literal", show(lit));
        }
        blob_.push_back(c);
        continue;
      }
      if (i + 1 >= body.size()) fail("an escape after the backslash", show(lit));
      const char e = body[++i];
      const std::string escape{'\\', e};  // for messages
      switch (e) {
        case '\\':
          blob_.push_back('\\');
          break;
        case '\'':
          blob_.push_back('\'');
          break;
        case '"':
          blob_.push_back('"');
          break;
        case 'n':
          blob_.push_back('\n');
          break;
        case 'r':
          blob_.push_back('\r');
          break;
        case 't':
          blob_.push_back('\t');
          break;
        case 'x':
        case 'u':
        case 'U': {
          if (bytes_mode && e != 'x') {
            fail("only the escapes \\\\ \\' \\\" \\n \\r \\t \\xHH in a b'...' literal",
                 escape + " in " + show(lit));
          }
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (size_t d = 0; d < digits; ++d) {
            const int h = i + 1 + d < body.size() ? hex_value(body[i + 1 + d]) : -1;
            if (h < 0) {
              fail(escape + " followed by " + std::to_string(digits) + " hex digits", show(lit));
            }
            v = v * 16 + static_cast<uint32_t>(h);
          }
          i += digits;
          if (bytes_mode) {
            blob_.push_back(static_cast<char>(v));
          } else {
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
              fail("a code point that has a UTF-8 form (not a surrogate, at most U+10FFFF)",
                   show(lit));
            }
            base::utf8::append_code_point(blob_, static_cast<char32_t>(v));
          }
          break;
        }
        default:
          fail("one of the escapes \\\\ \\' \\\" \\n \\r \\t \\xHH \\uHHHH \\UHHHHHHHH",
               escape + " in " + show(lit));
      }
    }
    if (!bytes_mode && !base::utf8::is_valid(std::string_view(blob_).substr(start))) {
      fail("valid UTF-8 inside a '...' literal", show(lit));
    }
  }

  std::vector<Entry> parse(std::string_view contents) {
    std::vector<Entry> entries;
    entries.reserve(contents.size() / 16);
    blob_.reserve(contents.size() / 2);
    size_t pos = 0;
    int64_t prev_id = 0;
    size_t prev_line = 0;
    while (pos < contents.size()) {
      ++line_no_;
      size_t eol = contents.find('\n', pos);
      if (eol == std::string_view::npos) eol = contents.size();
      std::string_view line = contents.substr(pos, eol - pos);
      pos = eol + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

      const size_t first = line.find(' ');
      const size_t last = line.rfind(' ');
      if (first == std::string_view::npos || first == last) {
        fail("a line '<id> <literal> <byte length>'", show(line));
      }
      const int64_t id = parse_decimal(line.substr(0, first));
      if (id < 0) fail("a decimal token id at the start of the line", show(line));
      const int64_t length = parse_decimal(line.substr(last + 1));
      if (length < 0) fail("a decimal byte length at the end of the line", show(line));
      if (id == 0) {
        fail("a token id >= 1 (id 0 is reserved for end of text)", show(line));
      }
      if (id > kMaxId) {
        fail("a token id <= " + std::to_string(kMaxId), std::to_string(id));
      }
      if (id == prev_id) {
        fail("a new token id", "id " + std::to_string(id) + " again (first on line " +
                                   std::to_string(prev_line) + ")");
      }
      if (id < prev_id) {
        fail("token ids in increasing order (after id " + std::to_string(prev_id) + " on line " +
                 std::to_string(prev_line) + ")",
             "id " + std::to_string(id));
      }

      const size_t start = blob_.size();
      decode_literal(line.substr(first + 1, last - first - 1));
      const size_t got = blob_.size() - start;
      if (got == 0) fail("a token of at least one byte", show(line));
      if (static_cast<int64_t>(got) != length) {
        fail("byte length " + std::to_string(got) + " (what the literal decodes to)",
             std::to_string(length) + " in " + show(line));
      }
      entries.push_back(Entry{static_cast<uint32_t>(id), static_cast<uint32_t>(start),
                              static_cast<uint32_t>(got), line_no_});
      prev_id = id;
      prev_line = line_no_;
    }
    return entries;
  }

 private:
  const std::string& path_;
  std::string& blob_;
  size_t line_no_ = 0;
};

// Build-time prefix tree: children as small sorted vectors.
struct TmpNode {
  int32_t entry = -1;  // index into the entries, -1 = no token ends here
  std::vector<std::pair<uint8_t, uint32_t>> kids;
};

}  // namespace

std::unique_ptr<WorldTokenizer> WorldTokenizer::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw FileError(path, std::string("cannot open the World vocabulary file for reading (") +
                              std::strerror(errno) + ")");
  }
  std::string contents;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  f.seekg(0, std::ios::beg);
  if (size > 0) {
    contents.resize(static_cast<size_t>(size));
    f.read(contents.data(), size);
  }
  if (size < 0 || !f) throw FileError(path, "error while reading the World vocabulary file");
  return parse(contents, path);
}

std::unique_ptr<WorldTokenizer> WorldTokenizer::parse(std::string_view contents,
                                                      const std::string& path) {
  if (contents.size() >= UINT32_MAX) {
    throw FormatError(path, "", "a vocabulary file smaller than 4 GiB",
                      std::to_string(contents.size()) + " bytes");
  }
  std::unique_ptr<WorldTokenizer> t(new WorldTokenizer());
  std::string parsed_blob;
  VocabParser parser(path, parsed_blob);
  const std::vector<Entry> entries = parser.parse(contents);

  // Prefix tree of all tokens; a second line with the same bytes is an error.
  std::vector<TmpNode> tmp(1);
  for (size_t e = 0; e < entries.size(); ++e) {
    const Entry& en = entries[e];
    uint32_t node = 0;
    for (uint32_t k = 0; k < en.length; ++k) {
      const auto c = static_cast<uint8_t>(parsed_blob[en.offset + k]);
      auto& kids = tmp[node].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), c,
                                 [](const auto& p, uint8_t v) { return p.first < v; });
      if (it != kids.end() && it->first == c) {
        node = it->second;
      } else {
        const auto next = static_cast<uint32_t>(tmp.size());
        kids.insert(it, {c, next});
        tmp.emplace_back();
        node = next;
      }
    }
    if (tmp[node].entry >= 0) {
      const Entry& other = entries[static_cast<size_t>(tmp[node].entry)];
      throw FormatError(path, "",
                        "token bytes that no other line has on line " + std::to_string(en.line),
                        "the same bytes as id " + std::to_string(other.id) + " on line " +
                            std::to_string(other.line));
    }
    tmp[node].entry = static_cast<int32_t>(e);
  }
  for (unsigned b = 0; b < 256; ++b) {
    auto& kids = tmp[0].kids;
    const bool has = b < kids.size() && kids[b].first == b && tmp[kids[b].second].entry >= 0;
    if (!has) {
      throw FormatError(
          path, "", "a token for every single byte 0x00..0xFF (so that any input can be encoded)",
          "no token for the byte " + hex_byte(b));
    }
  }

  // Lay the tree out as a double array. Nodes with the most children are placed first (they are
  // the hardest to fit, and they are the top of the tree that every match walks, so they end up
  // together at the front); each takes the first base at which all its children's slots are free.
  std::vector<uint32_t> bfs{0};
  for (size_t q = 0; q < bfs.size(); ++q) {
    for (const auto& kv : tmp[bfs[q]].kids) bfs.push_back(kv.second);
  }
  std::vector<uint32_t> order;
  for (uint32_t idx : bfs) {
    if (!tmp[idx].kids.empty()) order.push_back(idx);
  }
  std::stable_sort(order.begin(), order.end(), [&tmp](uint32_t x, uint32_t y) {
    return tmp[x].kids.size() > tmp[y].kids.size();
  });
  std::vector<uint32_t> base(tmp.size(), 0), slot(tmp.size(), 0);
  std::vector<uint8_t> used, base_used;
  std::vector<uint32_t> holes;  // free slots below `end`, increasing
  std::vector<uint8_t> misses;  // per hole: placements it could not take
  size_t end = 0;               // slots [0, end) are used or holes
  for (uint32_t idx : order) {
    const auto& kids = tmp[idx].kids;
    const size_t first = kids.front().first;
    size_t b = SIZE_MAX;
    for (size_t h = 0; h < holes.size();) {
      const size_t f = holes[h];
      bool fits = f >= first && !base_used[f - first];
      for (size_t j = 1; fits && j < kids.size(); ++j) {
        const size_t q = f - first + kids[j].first;
        fits = q >= end || !used[q];
      }
      if (fits) {
        b = f - first;
        break;
      }
      if (++misses[h] > 32) {  // a hole nothing fits stays empty; stop trying it
        holes.erase(holes.begin() + static_cast<std::ptrdiff_t>(h));
        misses.erase(misses.begin() + static_cast<std::ptrdiff_t>(h));
        continue;
      }
      ++h;
    }
    if (b == SIZE_MAX) {  // past the end everything is free
      b = end >= first ? end - first : 0;
      while (b < base_used.size() && base_used[b]) ++b;
    }
    const size_t top = b + kids.back().first + 1;
    if (top + 256 >= (size_t{1} << kSlotBits)) {
      throw FormatError(path, "",
                        "a vocabulary whose prefix tree fits " +
                            std::to_string(size_t{1} << kSlotBits) + " slots",
                        "a larger one (" + std::to_string(entries.size()) + " tokens)");
    }
    if (used.size() < top + 256) {
      used.resize(2 * (top + 256), 0);
      base_used.resize(2 * (top + 256), 0);
    }
    base_used[b] = 1;
    base[idx] = static_cast<uint32_t>(b);
    for (const auto& [label, kid] : kids) {
      const size_t q = b + label;
      used[q] = 1;
      slot[kid] = static_cast<uint32_t>(q);
      if (q < end) {
        auto it = std::lower_bound(holes.begin(), holes.end(), static_cast<uint32_t>(q));
        if (it != holes.end() && *it == q) {
          misses.erase(misses.begin() + (it - holes.begin()));
          holes.erase(it);
        }
      }
    }
    for (size_t q = end; q < top; ++q) {
      if (!used[q]) {
        holes.push_back(static_cast<uint32_t>(q));
        misses.push_back(0);
      }
    }
    end = std::max(end, top);
  }
  const auto leaf_base = static_cast<uint32_t>(end);  // 256 empty slots follow
  t->slots_.assign(end + 256, 0);
  t->slot_token_.assign(end + 256, 0);
  for (uint32_t idx : bfs) {
    for (const auto& [label, kid] : tmp[idx].kids) {
      const TmpNode& k = tmp[kid];
      const uint32_t kid_base = k.kids.empty() ? leaf_base : base[kid];
      t->slots_[slot[kid]] = kid_base << 10 | (k.entry >= 0 ? 1u << 9 : 0) | 1u << 8 | label;
      if (k.entry >= 0) {
        t->slot_token_[slot[kid]] = static_cast<int32_t>(entries[static_cast<size_t>(k.entry)].id);
      }
    }
  }
  t->root_base_ = base[0];
  for (const Entry& en : entries) t->max_depth_ = std::max<size_t>(t->max_depth_, en.length);

  // Decoding table by id. The lines are in id order, so the parsed bytes already are too; ids
  // the file skips get empty ranges.
  const uint32_t max_id = entries.back().id;
  t->offsets_.assign(static_cast<size_t>(max_id) + 2, 0);
  uint32_t next = 0;  // ids below `next` have their start offset
  for (const Entry& en : entries) {
    for (; next <= en.id; ++next) t->offsets_[next] = en.offset;
  }
  t->offsets_[next] = static_cast<uint32_t>(parsed_blob.size());
  t->blob_ = std::move(parsed_blob);
  t->blob_.append(16, '\0');  // padding for 16-byte copies in decode()
  t->token_count_ = entries.size();
  return t;
}

std::vector<int32_t> WorldTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  encode_append(text, ids);
  return ids;
}

void WorldTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  out.reserve(out.size() + n / 2 + 16);  // enough for most text; bytes-per-token is 2.5..4
  const uint32_t* slots = slots_.data();
  const int32_t* slot_token = slot_token_.data();
  const uint32_t root = root_base_;
  // One greedy match from `pos`: walk down as far as the tree goes, remember the last node that
  // ends a token. Every single byte is a token, so the first step always succeeds. A walk reads at
  // most max_depth_ bytes past pos (a node that deep is a leaf, whose children are all empty), so
  // while pos + max_depth_ < n the input needs no bounds check.
  auto match = [&](size_t pos, auto checked) {
    uint32_t best = root + p[pos];
    uint32_t node = slots[best];
    size_t best_end = pos + 1;
    for (size_t i = pos + 1;; ++i) {
      if constexpr (decltype(checked)::value) {
        if (i >= n) break;
      }
      const uint32_t c = p[i];
      const uint32_t s = (node >> 10) + c;
      const uint32_t next = slots[s];
      if ((next & 0x1FF) != (0x100 | c)) break;
      node = next;
      const bool token = next & 0x200;
      best = token ? s : best;  // branch-free: whether a token ends here is unpredictable
      best_end = token ? i + 1 : best_end;
    }
    out.push_back(slot_token[best]);
    return best_end;
  };
  size_t pos = 0;
  const size_t safe = n > max_depth_ ? n - max_depth_ : 0;
  while (pos < safe) pos = match(pos, std::false_type{});
  while (pos < n) pos = match(pos, std::true_type{});
}

std::string_view WorldTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const auto u = static_cast<size_t>(id);
  return std::string_view(blob_).substr(offsets_[u], offsets_[u + 1] - offsets_[u]);
}

std::string WorldTokenizer::decode(std::span<const int32_t> ids) const {
  const uint32_t* off = offsets_.data();
  const auto limit = static_cast<uint32_t>(vocab_size());
  size_t total = 0;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);  // negative ids become huge and fail the range test
    const size_t len = u < limit ? off[u + 1] - off[u] : 0;
    if (len == 0 && id != 0) {
      throw InputError(
          "token id " + std::to_string(id) + " is not in the World vocabulary (it has ids 1.." +
          std::to_string(vocab_size() - 1) +
          " and 0 for end of text); was it produced by a model with another tokenizer?");
    }
    total += len;
  }
  if (total < 64) {  // one token or a few (streaming): no padding, so short results stay inline
    std::string out;
    out.reserve(total);
    for (int32_t id : ids) out.append(token_bytes(id));
    return out;
  }
  // Most tokens are short: copy 16 bytes at a time (blob_ has 16 bytes of padding, and so does
  // `out` until the final resize).
  std::string out(total + 16, '\0');
  char* dst = out.data();
  const char* src = blob_.data();
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    const size_t len = off[u + 1] - off[u];
    if (len <= 16) {
      std::memcpy(dst, src + off[u], 16);
    } else {
      std::memcpy(dst, src + off[u], len);
    }
    dst += len;
  }
  out.resize(total);
  return out;
}

std::unique_ptr<Tokenizer> load_world_tokenizer(const std::string& path) {
  return WorldTokenizer::load(path);
}

}  // namespace wick
