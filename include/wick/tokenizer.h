// Text <-> token ids. Every task that takes text goes through this interface.
// This build has the byte-level tokenizer (vocabulary-256 models: id = byte value); World and BPE
// tokenizers plug in behind the same interface.
//
// Thread-safety: tokenizers are immutable after construction; encode/decode are safe to call from
// any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wick {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for UTF-8 (or arbitrary) bytes.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes of the tokens, concatenated (may end inside a UTF-8 sequence).
  // Throws InputError for an id the tokenizer does not have.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // Ids this tokenizer can produce are all < vocab_size().
  virtual int32_t vocab_size() const = 0;
  virtual std::string_view name() const = 0;
};

// id = byte value, vocabulary 256 (the tiny fixture model; RWKV byte-level models).
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return 256; }
  std::string_view name() const override { return "byte-level"; }
};

// The RWKV "World" tokenizer (World models, vocabulary file `rwkv_vocab_v20230424.txt`): greedy
// longest match over the bytes of the text. Encoding accepts any bytes (valid UTF-8 or not) and
// never fails; id 0 is the models' end-of-text token: the encoder never produces it and decoding it
// yields no bytes. vocab_size() is one past the largest id in the file (65530 for the standard
// file; the models' embedding has 65536 rows, ids 65530..65535 are never produced and do not
// decode). name() is "world". Throws FileError if the file cannot be read, FormatError (naming the
// line) if it is malformed: a line that is not `<id> <literal> <byte length>`, a bad escape, a
// length that disagrees with the literal, a duplicate id or token, ids out of increasing order, or
// a single byte with no token.
std::unique_ptr<Tokenizer> load_world_tokenizer(const std::string& path);

// The World vocabulary embedded in the binary (models/rwkv_vocab_v20230424.txt).
std::unique_ptr<Tokenizer> default_world_tokenizer();

// Picks the kind from the file: `.json` -> BPE (HuggingFace tokenizer.json), anything else ->
// World vocabulary. Throws FileError / FormatError.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// The tokenizer a model uses by default: byte-level for vocabulary 256, the embedded World
// vocabulary for 65536. Throws InputError for other sizes (pass a tokenizer explicitly).
std::unique_ptr<Tokenizer> default_tokenizer_for_vocab(int32_t model_vocab);

// Checks that the tokenizer belongs to a model with a vocabulary of `model_vocab` ids, in both
// directions: every id the tokenizer produces is below model_vocab (else the model cannot absorb
// it), the model's ids are the tokenizer's up to at most 1% of padding rows (else the model
// generates ids the tokenizer cannot decode), and the kind matches where the size names it (65536:
// the World tokenizer, 256: byte-level). Throws InputError naming both sizes and kinds otherwise
// (the classic mistake: a World model with the 20B tokenizer, or the reverse). The CLI skips this
// check with --allow-tokenizer-mismatch; decoding an id the tokenizer lacks still fails then.
void check_tokenizer_fits(const Tokenizer& tokenizer, int32_t model_vocab,
                          const std::string& tokenizer_name);

// Replaces every invalid part of `bytes` with U+FFFD and returns valid UTF-8: each maximal subpart
// of an ill-formed sequence becomes one U+FFFD (the Unicode "best practice", identical to Python's
// bytes.decode('utf-8', errors='replace') and to WHATWG / Rust from_utf8_lossy). Encoded surrogates
// (ED A0..BF ..), overlong forms (C0, C1, E0 80..9F, F0 80..8F) and code points above U+10FFFF
// (F4 90.., F5..FF) are invalid. Valid input is returned unchanged. Never throws (except
// bad_alloc).
std::string utf8_replace_invalid(std::string_view bytes);

// Turns a stream of token ids into text one id at a time, emitting only complete UTF-8 characters:
// a character whose bytes are split over several tokens (common for CJK, Cyrillic and emoji in the
// World vocabulary) is held back until its last byte arrives. Invalid bytes are replaced exactly as
// utf8_replace_invalid does, so the concatenation of every push() and the final flush() equals
// utf8_replace_invalid(tokenizer.decode(all ids)).
//
// Thread-safety: a StreamDecoder holds per-stream state and must not be used from two threads at
// once; use one per stream. The tokenizer is only read and must outlive the decoder.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer);

  // Adds the bytes of token `id` and returns the text that became complete (often empty while a
  // character is incomplete). Throws InputError (from Tokenizer::decode) for an id the tokenizer
  // does not have; the decoder's state is then unchanged.
  std::string push(int32_t id);

  // End of the stream: returns the held-back tail (an incomplete character becomes one U+FFFD) and
  // resets the decoder, which can then start a new stream. Never throws (except bad_alloc).
  std::string flush();

  // Bytes held back, waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // an incomplete but so far valid UTF-8 sequence
};

}  // namespace wick
