// SHA-256 digests as hex (base/sha256.h).
#include "base/sha256.h"

namespace wick::base {

std::string Sha256::hex_digest() {
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx_, SHA256_DIGEST_SIZE, digest);  // also re-initialises the context
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * SHA256_DIGEST_SIZE, '0');
  for (int i = 0; i < SHA256_DIGEST_SIZE; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  return Sha256().update(bytes).hex_digest();
}

}  // namespace wick::base
