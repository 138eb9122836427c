// SHA-256 (FIPS 180-4) through GNU Nettle: incremental hashing and lowercase hex digests.
#pragma once

#include <nettle/sha2.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace wick::base {

class Sha256 {
 public:
  Sha256() { sha256_init(&ctx_); }
  Sha256& update(std::string_view bytes) {
    sha256_update(&ctx_, bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
    return *this;
  }
  Sha256& update(const void* data, size_t n) {
    sha256_update(&ctx_, n, static_cast<const uint8_t*>(data));
    return *this;
  }
  // 64 lowercase hex digits. Finishes the hash; the object starts over afterwards.
  std::string hex_digest();

 private:
  sha256_ctx ctx_;
};

// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace wick::base
