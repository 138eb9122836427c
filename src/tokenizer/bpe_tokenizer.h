// Byte-level BPE (GPT-2 style) read from a HuggingFace `tokenizer.json`: the GPT-NeoX
// `20B_tokenizer.json` of RWKV Pile models, GPT-2, and files of the same shape.
//
// What it reproduces, id for id, from HuggingFace `tokenizers` (the reference):
//  * added tokens (special and not, `normalized` true or false) matched leftmost-longest in the
//  text,
//    those with `normalized: false` before normalization, the others after it;
//  * normalizer null, NFC or NFKC (Unicode 9.0 normalization data, as the reference has);
//  * the ByteLevel pre-tokenizer: `add_prefix_space`, and the GPT-2 split regex
//    `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` (matched by hand,
//    Unicode 16.0 letter / number / white-space classes, as the reference's Oniguruma has);
//  * the BPE model: merges as "a b" strings or ["a", "b"] pairs, lowest rank first (leftmost on
//    ties); `ignore_merges` (a pre-token that is itself in the vocabulary is taken whole);
//  * post-processors ByteLevel (adds nothing) and TemplateProcessing (single-sequence template);
//  * the ByteLevel decoder.
// Everything else that would change ids (other normalizers or pre-tokenizers, BPE dropout,
// byte_fallback, continuing_subword_prefix / end_of_word_suffix, added tokens with lstrip / rstrip
// / single_word, truncation, padding, a broken vocabulary or merge list) is refused at load with a
// FormatError naming the field.
//
// Input text must be valid UTF-8 (the reference cannot even be given anything else): encode throws
// InputError otherwise. decode returns the bytes of the tokens, which need not be valid UTF-8; the
// reference's text is utf8_replace_invalid() of them. Deliberate differences from the reference,
// none of which shows on its fixtures: decode throws InputError for an unknown id (the reference
// skips it), and an added token decodes to its content as written (the reference also runs added
// tokens through the byte-level decoder, so e.g. an added "naïve" would come out as "na�ve").
// A later duplicate of a merge replaces the earlier one's rank, as in the reference.
//
// Thread-safety: immutable after load; encode/decode may be called from any number of threads.
// Each thread that encodes keeps a cache of recent words (about 256 KiB, shared by all tokenizers,
// entries tagged with the tokenizer they belong to).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/tokenizer.h"

namespace wick {

struct BpeOptions {
  // What encode does with text that spells a special added token (`"special": true`, e.g.
  // "<|endoftext|>" in user input).
  enum class SpecialTokenText {
    kToken,  // it becomes the special token's id, like the reference's default
             // (HuggingFace: split_special_tokens = false). "a<|endoftext|>b" -> [a, 0, b].
    kText,   // it is ordinary text and is tokenized like any other characters (HuggingFace:
             // split_special_tokens = true); use this for untrusted input. Non-special added
             // tokens (e.g. the 20B whitespace runs) are still matched.
  };
  SpecialTokenText special_token_text = SpecialTokenText::kToken;

  // A non-null `truncation` or `padding` in the file is refused by default (truncation silently
  // shortens encodings). With this set they are ignored instead: encode never truncates or pads.
  bool ignore_truncation_and_padding = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads a tokenizer.json. Throws FileError if it cannot be read, FormatError (naming the field)
  // if it is not valid JSON, is malformed, or uses anything this class does not reproduce exactly.
  static std::unique_ptr<BpeTokenizer> load(const std::string& path, BpeOptions options = {});
  // Same, from the JSON text itself; `source` names it in error messages.
  static std::unique_ptr<BpeTokenizer> load_from_json(std::string_view json,
                                                      const std::string& source,
                                                      BpeOptions options = {});

  ~BpeTokenizer() override;

  // Like the reference's encode(text): post-processor template included (add_special_tokens).
  std::vector<int32_t> encode(std::string_view text) const override { return encode(text, true); }
  // add_special_tokens = false leaves out what the post-processor adds (TemplateProcessing ids).
  // Special tokens spelled in the text are governed by BpeOptions::special_token_text instead.
  // Throws InputError if `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;

  // The bytes of the tokens (ByteLevel decoder), special tokens included.
  std::string decode(std::span<const int32_t> ids) const override { return decode(ids, false); }
  // skip_special_tokens drops the `"special": true` added tokens (not the other added tokens).
  // Throws InputError for an id the tokenizer does not have (the reference silently skips it).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One past the largest id (vocabulary and added tokens).
  int32_t vocab_size() const override;
  std::string_view name() const override { return "bpe"; }

  // The id of a token given in its tokenizer.json spelling (byte-level alphabet for vocabulary
  // entries, plain content for added tokens), e.g. token_to_id("<|endoftext|>").
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The tokenizer.json spelling of an id; nullopt for an id the tokenizer does not have.
  std::optional<std::string> id_to_token(int32_t id) const;
  // Whether id is a `"special": true` added token.
  bool is_special(int32_t id) const;

  struct Impl;

 private:
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wick
