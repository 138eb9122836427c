// The RWKV "World" tokenizer: vocabulary file `rwkv_vocab_v20230424.txt`, greedy longest match
// over the bytes of the input.
//
// Vocabulary file: one token per line, `<id> <literal> <byte length>`, where the literal
// (everything between the first and the last space) is Python's repr() of the token: `'...'` /
// `"..."` is a str whose UTF-8 encoding is the token, `b'...'` is raw bytes. Escapes: \\ \' \" \n
// \r \t \xHH (a byte in b'...', the code point U+00HH in '...'), \uHHHH and \UHHHHHHHH (str only).
// The byte length is checked against the decoded literal. Ids must be >= 1 and strictly increasing
// (gaps are allowed and simply do not decode); no two lines may have the same bytes; every single
// byte must be a token (so that any input can be encoded). A trailing CR on a line is ignored.
//
// Encoding: from each position take the longest token that is a prefix of the remaining bytes, by
// walking a flat prefix tree (a double array: every node a 256-way table, the tables overlapped in
// one array; see below) as far as it goes and remembering the last node that ends a token. Walking
// it allocates nothing. Any bytes are accepted (valid UTF-8 or not); encoding never fails.
//
// Ids: 0 is the models' end-of-text token. The encoder never produces it; decoding it yields no
// bytes. vocab_size() is one past the largest id in the file (65530 for the standard file; World
// models have a 65536-row embedding, ids 65530..65535 are unused and throw InputError in decode).
//
// Thread-safety: immutable after load(); encode/decode may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/tokenizer.h"

namespace wick {

class WorldTokenizer final : public Tokenizer {
 public:
  // Reads a vocabulary file. Throws FileError if it cannot be read, FormatError naming the line
  // for a malformed one.
  static std::unique_ptr<WorldTokenizer> load(const std::string& path);
  // Same from the file's contents already in memory; `path` is only used in error messages.
  static std::unique_ptr<WorldTokenizer> parse(std::string_view contents, const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const override;
  // Appends the ids of `text` to `out` (the only allocation is out's growth).
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  // Concatenated token bytes (need not be valid UTF-8). Id 0 adds nothing; an id that is not in the
  // file (negative, >= vocab_size(), or a gap) throws InputError.
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::string_view name() const override { return "world"; }

  // The bytes of token `id`; empty for 0 and for ids the file does not have.
  std::string_view token_bytes(int32_t id) const;
  // Number of tokens in the file (65529 for the standard file).
  size_t token_count() const { return token_count_; }

 private:
  WorldTokenizer() = default;

  // The prefix tree as a double array: the children of a node with base b sit in slots b + byte,
  // i.e. every node has a 256-way table, and the tables of different nodes overlap (each slot
  // records which byte led to it, and no two nodes share a base, so a slot belongs to the node
  // whose base + byte reaches it only if its label is that byte). A step of the walk is one load
  // and one compare; the whole tree for the standard vocab is about 0.5 MB.
  // slot = base << 10 | has_token << 9 | 1 << 8 | label; 0 = empty. Leaves point at a block of
  // 256 empty slots at the end.
  static constexpr uint32_t kSlotBits = 22;  // at most 2^22 slots
  std::vector<uint32_t> slots_;
  std::vector<int32_t> slot_token_;  // token id of the node in a slot (where has_token)
  uint32_t root_base_ = 0;
  size_t max_depth_ = 0;  // longest token, in bytes

  std::string blob_;               // all token bytes, by id, then 16 bytes of padding
  std::vector<uint32_t> offsets_;  // token id's bytes are blob_[offsets_[id], offsets_[id + 1])
  size_t token_count_ = 0;
};

}  // namespace wick
