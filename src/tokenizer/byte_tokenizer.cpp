#include "wick/errors.h"
#include "wick/tokenizer.h"

namespace wick {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id > 255) {
      throw InputError("token id " + std::to_string(id) +
                       " is not a byte; the byte-level tokenizer has ids 0..255");
    }
    out.push_back(static_cast<char>(id));
  }
  return out;
}

}  // namespace wick
