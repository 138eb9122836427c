// NFC / NFKC: full (canonical or compatibility) decomposition, canonical ordering, canonical
// composition, as defined in Unicode Standard Annex #15, with Hangul handled algorithmically.
#include "tokenizer/unicode_norm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/utf8.h"
#include "tokenizer/unicode_tables.h"

namespace wick::unicode {
namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// Decodes one code point of valid UTF-8 at s[i], advancing i.
inline char32_t next_cp(std::string_view s, size_t& i) {
  size_t length;
  const char32_t c =
      base::utf8::decode_valid(reinterpret_cast<const unsigned char*>(s.data()) + i, length);
  i += length;
  return c;
}

const Decomposition* find_decomp(const Decomposition* table, size_t n, char32_t c) {
  const Decomposition* end = table + n;
  const Decomposition* it =
      std::lower_bound(table, end, c, [](const Decomposition& d, char32_t v) { return d.cp < v; });
  return (it != end && it->cp == c) ? it : nullptr;
}

void decompose(char32_t c, bool compat, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = compat ? find_decomp(kCompatDecomps, kCompatDecompCount, c)
                                  : find_decomp(kCanonicalDecomps, kCanonicalDecompCount, c);
  if (!d) {
    out.push_back(c);
    return;
  }
  const char32_t* data = compat ? kCompatDecompData : kCanonicalDecompData;
  out.insert(out.end(), data + d->offset, data + d->offset + d->length);
}

// The primary composite of (a, b), or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const uint64_t key = (uint64_t(a) << 21) | b;
  const Composition* end = kCompositions + kCompositionCount;
  const Composition* it = std::lower_bound(
      kCompositions, end, key, [](const Composition& x, uint64_t k) { return x.key < k; });
  return (it != end && it->key == key) ? it->composite : 0;
}

// Normalizes one segment (it starts and ends at normalization boundaries) and appends it.
void normalize_segment(std::string_view text, bool compat, std::vector<char32_t>& buf,
                       std::string& out) {
  buf.clear();
  for (size_t i = 0; i < text.size();) decompose(next_cp(text, i), compat, buf);

  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t k = 1; k < buf.size(); ++k) {
    const uint8_t cc = combining_class(buf[k]);
    if (cc == 0) continue;
    size_t j = k;
    const char32_t c = buf[k];
    while (j > 0) {
      const uint8_t prev = combining_class(buf[j - 1]);
      if (prev == 0 || prev <= cc) break;
      buf[j] = buf[j - 1];
      --j;
    }
    buf[j] = c;
  }

  // Canonical composition.
  size_t w = 0;               // output length
  size_t starter = SIZE_MAX;  // index (in the output) of the last starter
  int last_cc = -1;           // combining class of the last character kept
  for (size_t k = 0; k < buf.size(); ++k) {
    const char32_t c = buf[k];
    const uint8_t cc = combining_class(c);
    if (starter != SIZE_MAX) {
      // Blocked when something between the starter and c has class 0 or >= cc.
      const bool adjacent = (starter == w - 1);
      const bool blocked = !adjacent && (last_cc == 0 || last_cc >= cc);
      if (!blocked) {
        if (char32_t comp = compose_pair(buf[starter], c)) {
          buf[starter] = comp;
          continue;
        }
      }
    }
    if (cc == 0) starter = w;
    last_cc = cc;
    buf[w++] = c;
  }
  for (size_t k = 0; k < w; ++k) base::utf8::append_code_point(out, buf[k]);
}

}  // namespace

// A character without the "unsafe" bit has combining class 0 and cannot combine with what precedes
// it, so there is a normalization boundary before it: only the stretches from the last such
// character before an unsafe one up to the next such character need the full algorithm; the rest
// is copied.
bool normalize(std::string_view text, NormalForm form, std::string& out) {
  const bool compat = form == NormalForm::kNFKC;
  const uint16_t unsafe_bit = compat ? kPropNfkcUnsafe : kPropNfcUnsafe;
  const size_t n = text.size();
  std::vector<char32_t> buf;
  size_t copied = 0;     // text[0, copied) is already in out
  size_t last_safe = 0;  // start of the last safe character seen
  bool changed = false;
  size_t i = 0;
  while (i < n) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      last_safe = i++;
      continue;
    }
    const size_t at = i;
    if (!(props(next_cp(text, i)) & unsafe_bit)) {
      last_safe = at;
      continue;
    }
    // Unsafe character at `at`: the segment runs from the last safe character (or the start, if
    // none was seen since what was copied) to the next safe one.
    if (!changed) {
      out.clear();
      out.reserve(n + 16);
      changed = true;
    }
    const size_t seg_begin = std::max(last_safe, copied);
    out.append(text.substr(copied, seg_begin - copied));
    size_t seg_end = i;
    while (seg_end < n) {
      if (static_cast<unsigned char>(text[seg_end]) < 0x80) break;
      size_t k = seg_end;
      if (!(props(next_cp(text, k)) & unsafe_bit)) break;
      seg_end = k;
    }
    normalize_segment(text.substr(seg_begin, seg_end - seg_begin), compat, buf, out);
    copied = seg_end;
    last_safe = seg_end;
    i = seg_end;
  }
  if (!changed) return false;
  out.append(text.substr(copied));
  return true;
}

std::string normalized(std::string_view text, NormalForm form) {
  std::string out;
  if (!normalize(text, form, out)) out.assign(text);
  return out;
}

}  // namespace wick::unicode
