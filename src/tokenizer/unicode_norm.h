// NFC and NFKC normalization of UTF-8 text with the tables of unicode_tables.cpp (Unicode 9.0
// normalization data: the version HuggingFace tokenizers uses, so normalized text matches it;
// characters assigned later are left as they are). Pure functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace wick::unicode {

enum class NormalForm { kNFC, kNFKC };

// Normalizes `text` (which must be valid UTF-8) into `out` (replacing its contents). Returns false,
// leaving `out` untouched, when the text is already normalized: the quick check found no character
// that normalization could change.
bool normalize(std::string_view text, NormalForm form, std::string& out);

// Convenience form that always returns the normalized text.
std::string normalized(std::string_view text, NormalForm form);

}  // namespace wick::unicode
