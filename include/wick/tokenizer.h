// Text <-> token ids. Every task that takes text goes through this interface.
// This build has the byte-level tokenizer (vocabulary-256 models: id = byte value); World and BPE
// tokenizers plug in behind the same interface.
//
// Thread-safety: tokenizers are immutable after construction; encode/decode are safe to call from
// any number of threads.
#pragma once

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

}  // namespace wick
