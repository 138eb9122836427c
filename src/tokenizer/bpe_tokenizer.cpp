// Byte-level BPE from a HuggingFace tokenizer.json. See bpe_tokenizer.h for what is reproduced.
//
// Encoding pipeline (per call):
//   1. validate UTF-8;
//   2. split off added tokens with `normalized: false` (leftmost-longest);
//   3. normalize each remaining piece (NFC / NFKC / nothing);
//   4. split off added tokens with `normalized: true`;
//   5. per remaining piece: prefix space (add_prefix_space), GPT-2 regex split into words;
//   6. per word: its bytes -> the ids of the one-byte symbols -> BPE merges by rank (a hash map
//   keyed
//      by the pair of ids) -> ids; short words go through a per-thread cache of recent words;
//   7. template ids around the result.
// The byte-level alphabet never has to be materialized while encoding: byte b starts as the id of
// the one-character token for b, and merges work on ids.
#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "base/utf8.h"
#include "tokenizer/unicode_norm.h"
#include "tokenizer/unicode_tables.h"
#include "wick/errors.h"

namespace wick {
namespace {

using json = nlohmann::json;

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

// ---------------------------------------------------------------------------------------------
// The byte-level alphabet: each byte is one Unicode character.

struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<int16_t, 0x144> cp_to_byte{};  // -1 where the code point is not in the alphabet

  ByteAlphabet() {
    cp_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool same = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_to_cp[b] = same ? char32_t(b) : next++;
      cp_to_byte[byte_to_cp[b]] = int16_t(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

using base::utf8::decode_valid;

// ---------------------------------------------------------------------------------------------
// Merge ranks: open-addressing hash map (pair of ids) -> (rank, id of the merged token).

class MergeMap {
 public:
  struct Value {
    uint32_t rank;
    int32_t id;
  };

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    values_.assign(cap, Value{kNoRank, -1});
    mask_ = cap - 1;
    shift_ = 64 - __builtin_ctzll(cap);
  }
  // Inserts or overwrites (a later duplicate merge replaces the earlier one, as in the reference).
  void put(int32_t a, int32_t b, Value v) {
    const uint64_t key = make_key(a, b);
    size_t i = slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    keys_[i] = key;
    values_[i] = v;
  }
  inline Value get(int32_t a, int32_t b) const {
    const uint64_t key = make_key(a, b);
    size_t i = slot(key);
    while (true) {
      const uint64_t k = keys_[i];
      if (k == key) return values_[i];
      if (k == kEmpty) return Value{kNoRank, -1};
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t make_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  size_t slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t mask_ = 0;
  int shift_ = 64;
};

// ---------------------------------------------------------------------------------------------
// A cache of recent words (direct-mapped): the BPE of a word is a pure function of the tokenizer
// and the word's bytes, and natural text repeats words a lot. Each tokenizer keeps its own caches
// (one per concurrent encode() call, reused across calls), so nothing is shared between
// tokenizers or threads.

struct WordCache {
  static constexpr size_t kSlots = 4096;
  static constexpr size_t kMaxBytes = 24;
  static constexpr size_t kMaxIds = 6;
  struct Entry {
    uint8_t len = 0;  // 0: empty
    uint8_t nids = 0;
    char bytes[kMaxBytes];
    int32_t ids[kMaxIds];
  };
  Entry entries[kSlots];

  static uint64_t hash(const unsigned char* w, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t v;
      std::memcpy(&v, w + i, 8);
      h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
      h ^= h >> 29;
    }
    uint64_t v = 0;
    std::memcpy(&v, w + i, n - i);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 32);
  }
};

// ---------------------------------------------------------------------------------------------
// Added-token matcher: a byte trie, leftmost-longest, non-overlapping.

class TokenMatcher {
 public:
  void add(std::string_view content, int32_t id) {
    if (nodes_.empty()) nodes_.emplace_back();
    size_t n = 0;
    for (unsigned char c : content) {
      int32_t child = find_child(n, c);
      if (child < 0) {
        child = int32_t(nodes_.size());
        nodes_.emplace_back();
        nodes_[n].children.emplace_back(c, child);
      }
      n = size_t(child);
    }
    nodes_[n].id = id;
    first_[static_cast<unsigned char>(content[0])] = true;
  }
  bool empty() const { return nodes_.empty(); }

  // Calls on_text(string_view) for the text between matches and on_token(id) for each match.
  template <class OnText, class OnToken>
  void split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
    if (nodes_.empty()) {
      if (!text.empty()) on_text(text);
      return;
    }
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t done = 0;
    for (size_t i = 0; i < n;) {
      if (!first_[s[i]]) {
        ++i;
        continue;
      }
      size_t node = 0, best_len = 0;
      int32_t best_id = -1;
      for (size_t k = i; k < n; ++k) {
        const int32_t child = find_child(node, s[k]);
        if (child < 0) break;
        node = size_t(child);
        if (nodes_[node].id >= 0) {
          best_id = nodes_[node].id;
          best_len = k + 1 - i;
        }
      }
      if (best_id < 0) {
        ++i;
        continue;
      }
      if (i > done) on_text(text.substr(done, i - done));
      on_token(best_id);
      i += best_len;
      done = i;
    }
    if (done < n) on_text(text.substr(done));
  }

 private:
  struct Node {
    int32_t id = -1;
    std::vector<std::pair<unsigned char, int32_t>> children;
  };
  int32_t find_child(size_t node, unsigned char c) const {
    for (const auto& [b, child] : nodes_[node].children) {
      if (b == c) return child;
    }
    return -1;
  }
  std::vector<Node> nodes_;
  std::array<bool, 256> first_{};
};

// ---------------------------------------------------------------------------------------------
// The GPT-2 split regex, by hand:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+

struct AsciiClasses {
  std::array<uint8_t, 128> cls{};
  AsciiClasses() {
    for (char32_t c = 0; c < 128; ++c) cls[c] = unicode::char_class(c);
  }
};
const AsciiClasses& ascii_classes() {
  static const AsciiClasses a;
  return a;
}

inline uint8_t class_at(const unsigned char* s, size_t i, size_t& len) {
  if (s[i] < 0x80) {
    len = 1;
    return ascii_classes().cls[s[i]];
  }
  return unicode::char_class(decode_valid(s + i, len));
}

// Calls emit(begin, end) for each word of s[0, n), in order; the words cover s.
template <class Emit>
void split_words(const unsigned char* s, size_t n, Emit&& emit) {
  const auto& ascii = ascii_classes().cls;
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c == '\'' && i + 1 < n) {
      const unsigned char d = s[i + 1];
      if (d == 's' || d == 't' || d == 'm' || d == 'd') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n && ((d == 'r' && s[i + 2] == 'e') || (d == 'v' && s[i + 2] == 'e') ||
                        (d == 'l' && s[i + 2] == 'l'))) {
        emit(i, i + 3);
        i += 3;
        continue;
      }
    }
    size_t len;
    uint8_t cls = c < 0x80 ? (len = 1, ascii[c]) : class_at(s, i, len);
    size_t j = i + len;
    if (c == ' ' && j < n) {
      // " ?" before a letter / number / other run.
      size_t len2;
      const uint8_t cls2 = class_at(s, j, len2);
      if (cls2 != unicode::kSpace) {
        cls = cls2;
        j += len2;
      }
    }
    if (cls == unicode::kSpace) {
      // \s+(?!\S) | \s+ : a run of white space; if a non-space follows, its last character is
      // left to start the next word (unless the run is one character long).
      size_t last = i, count = 1, k = j;
      while (k < n) {
        size_t l;
        if (class_at(s, k, l) != unicode::kSpace) break;
        last = k;
        k += l;
        ++count;
      }
      if (k == n || count == 1) {
        emit(i, k);
        i = k;
      } else {
        emit(i, last);
        i = last;
      }
      continue;
    }
    while (j < n) {
      size_t l;
      if (s[j] < 0x80) {
        if (ascii[s[j]] != cls) break;
        ++j;
        continue;
      }
      if (class_at(s, j, l) != cls) break;
      j += l;
    }
    emit(i, j);
    i = j;
  }
}

// ---------------------------------------------------------------------------------------------

enum class Normalizer { kNone, kNFC, kNFKC };

std::string describe(const json& j) {
  std::string s = j.dump();
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// A component (normalizer, pre_tokenizer, ...) by its type when it has one.
std::string describe_component(const json& j) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string()) return "type \"" + it->get<std::string>() + "\"";
  }
  return describe(j);
}

constexpr int64_t kMaxId = int64_t(1) << 24;

}  // namespace

// ---------------------------------------------------------------------------------------------

struct BpeTokenizer::Impl {
  BpeOptions options;
  Normalizer normalizer = Normalizer::kNone;
  bool add_prefix_space = false;
  bool ignore_merges = false;

  std::array<int32_t, 256> byte_id{};  // id of the one-byte symbol, -1 if absent
  MergeMap merges;
  std::unordered_map<std::string, int32_t> whole_word;  // raw bytes -> id (ignore_merges only)

  TokenMatcher raw_tokens;   // added tokens with normalized: false
  TokenMatcher norm_tokens;  // added tokens with normalized: true (content normalized)

  std::vector<int32_t> prefix_ids, suffix_ids;  // template around the sequence

  // Decoding and lookups, indexed by id.
  std::vector<uint32_t> token_offset;  // into token_bytes; size vocab_size + 1
  std::string token_bytes;
  std::vector<uint8_t> id_flags;  // bit 0: exists, bit 1: special
  std::vector<std::string> spelling;
  std::unordered_map<std::string, int32_t> spelling_to_id;
  int32_t vocab_size = 0;

  void bpe_word(const unsigned char* w, size_t n, std::vector<int32_t>& out) const;
  void bpe_word_cached(const unsigned char* w, size_t n, std::vector<int32_t>& out,
                       WordCache& cache) const;
  void bpe_long(const unsigned char* w, size_t n, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, WordCache& cache) const;
  void encode_words(std::string_view piece, std::vector<int32_t>& out, WordCache& cache) const;

  // Word caches not in use by an encode() call (taken and returned under cache_mutex).
  mutable std::mutex cache_mutex;
  mutable std::vector<std::unique_ptr<WordCache>> spare_caches;
};

void BpeTokenizer::Impl::bpe_word(const unsigned char* w, size_t n,
                                  std::vector<int32_t>& out) const {
  if (n == 1) {
    if (byte_id[w[0]] >= 0) out.push_back(byte_id[w[0]]);
    return;
  }
  if (ignore_merges) {
    auto it = whole_word.find(std::string(reinterpret_cast<const char*>(w), n));
    if (it != whole_word.end()) {
      out.push_back(it->second);
      return;
    }
  }
  constexpr size_t kSmall = 64;
  if (n > kSmall) {
    bpe_long(w, n, out);
    return;
  }
  int32_t sym[kSmall];
  uint32_t rank[kSmall];
  int32_t next_id[kSmall];
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = byte_id[w[i]];
    if (id >= 0) sym[m++] = id;  // a byte without a symbol is dropped, as the reference does
  }
  if (m == 0) return;
  for (size_t i = 0; i + 1 < m; ++i) {
    const MergeMap::Value v = merges.get(sym[i], sym[i + 1]);
    rank[i] = v.rank;
    next_id[i] = v.id;
  }
  while (m > 1) {
    size_t best = 0;
    uint32_t best_rank = rank[0];
    for (size_t i = 1; i + 1 < m; ++i) {
      if (rank[i] < best_rank) {
        best_rank = rank[i];
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    sym[best] = next_id[best];
    // Remove symbol best + 1 and the pair that started at it.
    for (size_t i = best + 1; i + 1 < m; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      next_id[i] = next_id[i + 1];
    }
    --m;
    if (best + 1 < m) {
      const MergeMap::Value v = merges.get(sym[best], sym[best + 1]);
      rank[best] = v.rank;
      next_id[best] = v.id;
    }
    if (best > 0) {
      const MergeMap::Value v = merges.get(sym[best - 1], sym[best]);
      rank[best - 1] = v.rank;
      next_id[best - 1] = v.id;
    }
  }
  out.insert(out.end(), sym, sym + m);
}

void BpeTokenizer::Impl::bpe_word_cached(const unsigned char* w, size_t n,
                                         std::vector<int32_t>& out, WordCache& cache) const {
  if (n == 1 || n > WordCache::kMaxBytes) {
    bpe_word(w, n, out);
    return;
  }
  WordCache::Entry& e = cache.entries[WordCache::hash(w, n) & (WordCache::kSlots - 1)];
  if (e.len == n && std::memcmp(e.bytes, w, n) == 0) {
    out.insert(out.end(), e.ids, e.ids + e.nids);
    return;
  }
  const size_t before = out.size();
  bpe_word(w, n, out);
  const size_t got = out.size() - before;
  if (got <= WordCache::kMaxIds) {
    e.len = uint8_t(n);
    e.nids = uint8_t(got);
    std::memcpy(e.bytes, w, n);
    std::copy(out.begin() + std::ptrdiff_t(before), out.end(), e.ids);
  }
}

// Long words: doubly linked symbols and a min-heap of candidate merges ordered by (rank, position),
// stale entries skipped when popped. Same result as the simple loop: lowest rank first, leftmost on
// ties (positions keep their order as symbols merge).
void BpeTokenizer::Impl::bpe_long(const unsigned char* w, size_t n,
                                  std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int32_t prev, next;
  };
  struct Cand {
    uint32_t rank;
    int32_t pos;
    int32_t left, right;  // the ids the pair had when pushed
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Sym> sym;  // words this long are rare: their scratch is allocated per word
  std::vector<Cand> heap;
  sym.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = byte_id[w[i]];
    if (id < 0) continue;
    const int32_t k = int32_t(sym.size());
    sym.push_back({id, k - 1, k + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  const auto push = [&](int32_t pos, int32_t a, int32_t b) {
    const MergeMap::Value v = merges.get(a, b);
    if (v.rank == kNoRank) return;
    heap.push_back({v.rank, pos, a, b, v.id});
    std::push_heap(heap.begin(), heap.end(), std::greater<Cand>());
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    const MergeMap::Value v = merges.get(sym[i].id, sym[i + 1].id);
    if (v.rank != kNoRank) heap.push_back({v.rank, int32_t(i), sym[i].id, sym[i + 1].id, v.id});
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<Cand>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Cand>());
    const Cand c = heap.back();
    heap.pop_back();
    Sym& left = sym[size_t(c.pos)];
    // Stale: the left symbol was merged away or changed, or its right neighbour changed.
    if (left.id != c.left || left.next < 0 || sym[size_t(left.next)].id != c.right) continue;
    Sym& right = sym[size_t(left.next)];
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) sym[size_t(left.next)].prev = c.pos;
    if (left.prev >= 0) push(left.prev, sym[size_t(left.prev)].id, left.id);
    if (left.next >= 0) push(c.pos, left.id, sym[size_t(left.next)].id);
  }
  for (int32_t k = 0; k >= 0; k = sym[size_t(k)].next) out.push_back(sym[size_t(k)].id);
}

void BpeTokenizer::Impl::encode_words(std::string_view piece, std::vector<int32_t>& out,
                                      WordCache& cache) const {
  const auto* s = reinterpret_cast<const unsigned char*>(piece.data());
  split_words(s, piece.size(),
              [&](size_t b, size_t e) { bpe_word_cached(s + b, e - b, out, cache); });
}

void BpeTokenizer::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& out,
                                      WordCache& cache) const {
  if (add_prefix_space && piece[0] != ' ') {
    std::string spaced;
    spaced.reserve(piece.size() + 1);
    spaced.push_back(' ');
    spaced.append(piece);
    encode_words(spaced, out, cache);
  } else {
    encode_words(piece, out, cache);
  }
}

// ---------------------------------------------------------------------------------------------
// Loading.

namespace {

class Loader {
 public:
  Loader(std::string source, BpeOptions options) : src_(std::move(source)), options_(options) {}

  [[noreturn]] void refuse(const std::string& expected, const std::string& found) const {
    throw FormatError(src_, "", expected, found);
  }

  static const json& member(const json& obj, const char* key) {
    static const json kNull;
    if (!obj.is_object()) return kNull;
    auto it = obj.find(key);
    return it == obj.end() ? kNull : *it;
  }

  bool get_bool(const json& obj, const char* key, const std::string& where, bool def) const {
    const json& v = member(obj, key);
    if (v.is_null()) return def;
    if (!v.is_boolean()) refuse("`" + where + "." + key + "` to be true or false", describe(v));
    return v.get<bool>();
  }

  std::unique_ptr<BpeTokenizer::Impl> build(std::string_view text) {
    json root;
    try {
      root = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {  // syntax errors, and numbers beyond double's range
      refuse("a tokenizer.json file (valid JSON)", std::string("invalid JSON: ") + e.what());
    }
    if (!root.is_object()) refuse("a JSON object at the top of tokenizer.json", describe(root));

    auto impl = std::make_unique<BpeTokenizer::Impl>();
    impl->options = options_;

    // truncation / padding.
    for (const char* key : {"truncation", "padding"}) {
      const json& v = member(root, key);
      if (!v.is_null() && !options_.ignore_truncation_and_padding) {
        refuse(std::string("`") + key + "` to be null (wick never " +
                   (std::string(key) == "truncation" ? "truncates" : "pads") +
                   " encodings; BpeOptions::ignore_truncation_and_padding ignores the setting)",
               describe(v));
      }
    }

    load_model(root, *impl);
    load_added_tokens(root, *impl);
    load_normalizer(root, *impl);
    load_pre_tokenizer(root, *impl);
    load_post_processor(root, *impl);
    load_decoder(root);
    finish(*impl);
    return impl;
  }

 private:
  void load_model(const json& root, BpeTokenizer::Impl& impl) {
    const json& model = member(root, "model");
    if (!model.is_object()) refuse("`model` to be an object", describe(model));
    const json& type = member(model, "type");
    if (!type.is_null() && type != "BPE") {
      refuse("`model.type` to be \"BPE\" (wick reads byte-level BPE tokenizers only)",
             describe(type));
    }
    const json& dropout = member(model, "dropout");
    if (!dropout.is_null()) {
      refuse("`model.dropout` to be null (BPE dropout makes encoding random)", describe(dropout));
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json& v = member(model, key);
      if (!v.is_null() && !(v.is_string() && v.get_ref<const std::string&>().empty())) {
        refuse(std::string("`model.") + key +
                   "` to be null or \"\" (it changes how merges are formed; not GPT-2 byte-level "
                   "BPE)",
               describe(v));
      }
    }
    if (get_bool(model, "byte_fallback", "model", false)) {
      refuse(
          "`model.byte_fallback` to be false (<0xNN> byte fallback is a SentencePiece "
          "mechanism, meaningless with a byte-level alphabet)",
          "true");
    }
    get_bool(model, "fuse_unk", "model", false);
    impl.ignore_merges = get_bool(model, "ignore_merges", "model", false);
    const json& unk = member(model, "unk_token");
    if (!unk.is_null() && !unk.is_string()) {
      refuse("`model.unk_token` to be null or a string", describe(unk));
    }
    // unk_token can never be used: every byte of valid UTF-8 has a symbol (checked below).

    // Vocabulary.
    const json& vocab = member(model, "vocab");
    if (!vocab.is_object()) refuse("`model.vocab` to be an object token -> id", describe(vocab));
    vocab_.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
          it.value().get<int64_t>() >= kMaxId) {
        refuse("`model.vocab` ids to be integers 0..2^24",
               "\"" + it.key() + "\": " + describe(it.value()));
      }
      const int32_t id = it.value().get<int32_t>();
      vocab_.emplace(it.key(), id);
      set_spelling(id, it.key(), "`model.vocab`");
    }

    // The byte-level alphabet: every byte valid UTF-8 can contain needs its symbol.
    const ByteAlphabet& ab = alphabet();
    for (int b = 0; b < 256; ++b) {
      std::string sym;
      base::utf8::append_code_point(sym, ab.byte_to_cp[b]);
      auto it = vocab_.find(sym);
      impl.byte_id[b] = it == vocab_.end() ? -1 : it->second;
      const bool needed = b < 0xC0 || (b >= 0xC2 && b <= 0xF4);
      if (needed && impl.byte_id[b] < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        refuse(
            "`model.vocab` to have the byte-level symbol of every byte valid UTF-8 can "
            "contain",
            "no symbol '" + sym + "' for byte " + hex);
      }
    }

    // Merges.
    const json& merges = member(model, "merges");
    if (!merges.is_array()) refuse("`model.merges` to be a list", describe(merges));
    impl.merges.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
      const json& m = merges[r];
      const std::string where = "`model.merges[" + std::to_string(r) + "]`";
      std::string a, b;
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          refuse(where + " to be two tokens separated by one space", describe(m));
        }
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        refuse(where + " to be \"a b\" or [\"a\", \"b\"]", describe(m));
      }
      auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end()) {
        refuse(where + " to name tokens of `model.vocab`",
               "'" + (ia == vocab_.end() ? a : b) + "', which is not in the vocabulary");
      }
      if (iab == vocab_.end()) {
        refuse(where + " to produce a token of `model.vocab`",
               "'" + a + b + "', which is not in the vocabulary");
      }
      impl.merges.put(ia->second, ib->second, {uint32_t(r), iab->second});
    }

    if (impl.ignore_merges) {
      for (const auto& [tok, id] : vocab_) {
        std::string bytes;
        if (to_bytes(tok, bytes)) impl.whole_word[bytes] = id;
      }
    }
  }

  void load_added_tokens(const json& root, BpeTokenizer::Impl& impl) {
    const json& added = member(root, "added_tokens");
    if (added.is_null()) return;
    if (!added.is_array()) refuse("`added_tokens` to be a list", describe(added));
    for (size_t i = 0; i < added.size(); ++i) {
      const json& t = added[i];
      const std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object()) refuse("`" + where + "` to be an object", describe(t));
      const json& id = member(t, "id");
      const json& content = member(t, "content");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId) {
        refuse("`" + where + ".id` to be an integer 0..2^24", describe(id));
      }
      if (!content.is_string() || content.get_ref<const std::string&>().empty()) {
        refuse("`" + where + ".content` to be a non-empty string", describe(content));
      }
      for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
        if (get_bool(t, flag, where, false)) {
          refuse("`" + where + "." + flag +
                     "` to be false (wick does not implement lstrip / rstrip / single_word, "
                     "which change where an added token matches)",
                 "true");
        }
      }
      AddedToken a;
      a.id = id.get<int32_t>();
      a.content = content.get<std::string>();
      a.special = get_bool(t, "special", where, false);
      a.normalized = get_bool(t, "normalized", where, !a.special);
      // Same content, same id as the vocabulary, or not in it at all.
      auto v = vocab_.find(a.content);
      if (v != vocab_.end() && v->second != a.id) {
        refuse("`" + where + "` to have the id the vocabulary gives '" + a.content + "' (" +
                   std::to_string(v->second) + ")",
               "id " + std::to_string(a.id));
      }
      for (const AddedToken& other : added_) {
        if (other.content == a.content && other.id != a.id) {
          refuse("`" + where + ".content` to differ from every other added token's",
                 "'" + a.content + "' again (ids " + std::to_string(other.id) + " and " +
                     std::to_string(a.id) + ")");
        }
      }
      set_spelling(a.id, a.content, "`" + where + "`");
      added_.push_back(std::move(a));
    }
  }

  void load_normalizer(const json& root, BpeTokenizer::Impl& impl) {
    const json& n = member(root, "normalizer");
    if (n.is_null()) return;
    const json& type = n.is_object() ? member(n, "type") : n;
    if (type == "NFC") {
      impl.normalizer = Normalizer::kNFC;
    } else if (type == "NFKC") {
      impl.normalizer = Normalizer::kNFKC;
    } else {
      refuse("`normalizer` to be null, NFC or NFKC (others are not implemented)",
             describe_component(n));
    }
  }

  void load_pre_tokenizer(const json& root, BpeTokenizer::Impl& impl) {
    const json& p = member(root, "pre_tokenizer");
    if (!p.is_object() || member(p, "type") != "ByteLevel") {
      refuse("`pre_tokenizer` to be ByteLevel (others are not implemented)", describe_component(p));
    }
    if (!get_bool(p, "use_regex", "pre_tokenizer", true)) {
      refuse(
          "`pre_tokenizer.use_regex` to be true (ByteLevel without its GPT-2 regex needs "
          "another pre-tokenizer's split, which is not implemented)",
          "false");
    }
    const json& aps = member(p, "add_prefix_space");
    if (!aps.is_boolean()) {
      refuse("`pre_tokenizer.add_prefix_space` to be true or false", describe(aps));
    }
    impl.add_prefix_space = aps.get<bool>();
    get_bool(p, "trim_offsets", "pre_tokenizer", true);  // offsets only
  }

  void load_post_processor(const json& root, BpeTokenizer::Impl& impl) {
    const json& p = member(root, "post_processor");
    if (p.is_null()) return;
    const json& type = p.is_object() ? member(p, "type") : p;
    if (type == "ByteLevel") return;  // adjusts offsets only
    if (type != "TemplateProcessing") {
      refuse(
          "`post_processor` to be null, ByteLevel or TemplateProcessing (others are not "
          "implemented)",
          describe_component(p));
    }
    const json& specials = member(p, "special_tokens");
    if (!specials.is_null() && !specials.is_object()) {
      refuse("`post_processor.special_tokens` to be an object", describe(specials));
    }
    const json& single = member(p, "single");
    if (!single.is_array()) refuse("`post_processor.single` to be a list", describe(single));
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const json& item = single[i];
      const std::string where = "`post_processor.single[" + std::to_string(i) + "]`";
      if (item.is_object() && item.size() == 1 && item.contains("Sequence")) {
        const json& id = member(item["Sequence"], "id");
        if (id != "A" || seen_sequence) {
          refuse(where + " to be the one sequence \"A\" of a single-sequence template",
                 describe(item));
        }
        seen_sequence = true;
      } else if (item.is_object() && item.size() == 1 && item.contains("SpecialToken")) {
        const json& name = member(item["SpecialToken"], "id");
        const json* entry = nullptr;
        if (name.is_string() && specials.is_object()) {
          auto it = specials.find(name.get<std::string>());
          if (it != specials.end()) entry = &*it;
        }
        if (!entry || !entry->is_object() || !member(*entry, "ids").is_array()) {
          refuse(where + " to name an entry of `post_processor.special_tokens` with its ids",
                 describe(item));
        }
        for (const json& v : (*entry)["ids"]) {
          if (!v.is_number_integer() || !has_id(v.get<int64_t>())) {
            refuse("`post_processor.special_tokens` ids to be tokens of the vocabulary",
                   describe(*entry));
          }
          (seen_sequence ? impl.suffix_ids : impl.prefix_ids).push_back(v.get<int32_t>());
        }
      } else {
        refuse(where + " to be {\"Sequence\": ...} or {\"SpecialToken\": ...}", describe(item));
      }
    }
    if (!seen_sequence) refuse("`post_processor.single` to contain the sequence", describe(single));
  }

  void load_decoder(const json& root) {
    const json& d = member(root, "decoder");
    if (!d.is_object() || member(d, "type") != "ByteLevel") {
      refuse("`decoder` to be ByteLevel (others are not implemented)", describe_component(d));
    }
  }

  void finish(BpeTokenizer::Impl& impl) {
    // Added-token matchers (normalized ones are matched in normalized text, so normalize them).
    for (const AddedToken& a : added_) {
      if (a.special && options_.special_token_text == BpeOptions::SpecialTokenText::kText) {
        continue;
      }
      if (!a.normalized) {
        impl.raw_tokens.add(a.content, a.id);
      } else if (impl.normalizer == Normalizer::kNone) {
        impl.norm_tokens.add(a.content, a.id);
      } else {
        const std::string c = unicode::normalized(a.content, impl.normalizer == Normalizer::kNFC
                                                                 ? unicode::NormalForm::kNFC
                                                                 : unicode::NormalForm::kNFKC);
        impl.norm_tokens.add(c, a.id);
      }
    }

    // Per-id tables.
    const int32_t size = int32_t(spelling_.size());
    impl.vocab_size = size;
    impl.id_flags.assign(size_t(size), 0);
    impl.spelling.resize(size_t(size));
    impl.token_offset.assign(size_t(size) + 1, 0);
    std::vector<bool> added_id(size_t(size), false);
    for (const AddedToken& a : added_) {
      added_id[size_t(a.id)] = true;
      if (a.special) impl.id_flags[size_t(a.id)] |= 2;
    }
    for (int32_t id = 0; id < size; ++id) {
      impl.token_offset[size_t(id)] = uint32_t(impl.token_bytes.size());
      if (!spelling_[size_t(id)]) continue;
      const std::string& sp = *spelling_[size_t(id)];
      impl.id_flags[size_t(id)] |= 1;
      impl.spelling[size_t(id)] = sp;
      // Added tokens decode to their content; vocabulary tokens through the byte-level alphabet
      // (a token with a character outside the alphabet decodes to its own UTF-8, as the
      // reference's ByteLevel decoder does).
      std::string bytes;
      if (added_id[size_t(id)] || !to_bytes(sp, bytes)) bytes = sp;
      impl.token_bytes += bytes;
    }
    impl.token_offset[size_t(size)] = uint32_t(impl.token_bytes.size());
    impl.spelling_to_id = std::move(vocab_);
    for (const AddedToken& a : added_) impl.spelling_to_id.emplace(a.content, a.id);
  }

  struct AddedToken {
    int32_t id;
    std::string content;
    bool special, normalized;
  };

  bool has_id(int64_t id) const {
    return id >= 0 && id < int64_t(spelling_.size()) && spelling_[size_t(id)].has_value();
  }

  void set_spelling(int32_t id, const std::string& s, const std::string& where) {
    if (size_t(id) >= spelling_.size()) spelling_.resize(size_t(id) + 1);
    auto& slot = spelling_[size_t(id)];
    if (slot && *slot != s) {
      refuse(where + " to give each id to one token only",
             "id " + std::to_string(id) + " given to both '" + *slot + "' and '" + s + "'");
    }
    slot = s;
  }

  // A token spelled in the byte-level alphabet -> its bytes; false if a character is not in it.
  static bool to_bytes(const std::string& tok, std::string& out) {
    const ByteAlphabet& ab = alphabet();
    out.clear();
    const auto* s = reinterpret_cast<const unsigned char*>(tok.data());
    if (!base::utf8::is_valid(tok)) return false;
    for (size_t i = 0; i < tok.size();) {
      size_t len;
      const char32_t c = decode_valid(s + i, len);
      if (c >= ab.cp_to_byte.size() || ab.cp_to_byte[c] < 0) return false;
      out.push_back(char(ab.cp_to_byte[c]));
      i += len;
    }
    return true;
  }

  std::string src_;
  BpeOptions options_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::optional<std::string>> spelling_;
  std::vector<AddedToken> added_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::string& path, BpeOptions options) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw FileError(path, "cannot open the tokenizer file (" + std::string(strerror(errno)) + ")");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw FileError(path, "cannot read the tokenizer file");
  return load_from_json(ss.str(), path, options);
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::load_from_json(std::string_view json_text,
                                                           const std::string& source,
                                                           BpeOptions options) {
  Loader loader(source, options);
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(loader.build(json_text)));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = base::utf8::valid_prefix_length(text);
  if (bad != text.size()) {
    throw InputError("the BPE tokenizer needs valid UTF-8 text; the byte at offset " +
                     std::to_string(bad) + " starts an invalid sequence");
  }
  const Impl& im = *impl_;
  // A word cache of this tokenizer for this call: a spare one, or a new one that joins the spares.
  std::unique_ptr<WordCache> cache;
  {
    std::lock_guard<std::mutex> lock(im.cache_mutex);
    if (!im.spare_caches.empty()) {
      cache = std::move(im.spare_caches.back());
      im.spare_caches.pop_back();
    }
  }
  if (!cache) cache = std::make_unique<WordCache>();
  struct GiveBack {
    const Impl& im;
    std::unique_ptr<WordCache>& cache;
    ~GiveBack() {
      std::lock_guard<std::mutex> lock(im.cache_mutex);
      im.spare_caches.push_back(std::move(cache));
    }
  } give_back{im, cache};
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  if (add_special_tokens) out.insert(out.end(), im.prefix_ids.begin(), im.prefix_ids.end());
  std::string norm;
  auto push_id = [&](int32_t id) { out.push_back(id); };
  im.raw_tokens.split(
      text,
      [&](std::string_view piece) {
        std::string_view p = piece;
        if (im.normalizer != Normalizer::kNone &&
            unicode::normalize(piece,
                               im.normalizer == Normalizer::kNFC ? unicode::NormalForm::kNFC
                                                                 : unicode::NormalForm::kNFKC,
                               norm)) {
          p = norm;
        }
        im.norm_tokens.split(
            p, [&](std::string_view q) { im.encode_piece(q, out, *cache); }, push_id);
      },
      push_id);
  if (add_special_tokens) out.insert(out.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= im.vocab_size || !(im.id_flags[size_t(id)] & 1)) {
      throw InputError("token id " + std::to_string(id) + " is not in the BPE vocabulary (ids " +
                       "0.." + std::to_string(im.vocab_size - 1) + ")");
    }
    if (skip_special_tokens && (im.id_flags[size_t(id)] & 2)) continue;
    out.append(im.token_bytes, im.token_offset[size_t(id)],
               im.token_offset[size_t(id) + 1] - im.token_offset[size_t(id)]);
  }
  return out;
}

int32_t BpeTokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->spelling_to_id.find(std::string(token));
  if (it == impl_->spelling_to_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> BpeTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size || !(impl_->id_flags[size_t(id)] & 1)) return std::nullopt;
  return impl_->spelling[size_t(id)];
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && (impl_->id_flags[size_t(id)] & 2);
}

}  // namespace wick
