// StreamDecoder: token ids in, complete UTF-8 characters out, and utf8_replace_invalid, its
// one-shot form. See wick/tokenizer.h.
#include <span>

#include "base/utf8.h"
#include "wick/tokenizer.h"

namespace wick {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

std::string StreamDecoder::push(int32_t id) {
  // Decode first: if the id is unknown this throws and the held-back bytes stay as they were.
  std::string bytes = tokenizer_->decode(std::span<const int32_t>(&id, 1));
  if (pending_.empty() && base::utf8::is_valid(bytes))
    return bytes;  // the usual case: whole characters
  // Replace what is known to be invalid, emit what is complete, keep a truncated tail (<= 3 bytes).
  std::string out;
  if (pending_.empty()) {
    size_t used = base::utf8::append_replacing_invalid(bytes, out, /*final=*/false);
    pending_.assign(bytes, used);
  } else {
    std::string joined = pending_ + bytes;
    size_t used = base::utf8::append_replacing_invalid(joined, out, /*final=*/false);
    pending_.assign(joined, used);
  }
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  base::utf8::append_replacing_invalid(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + (bytes.size() >> 3));
  base::utf8::append_replacing_invalid(bytes, out, /*final=*/true);
  return out;
}

}  // namespace wick
