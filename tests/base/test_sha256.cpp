// base::Sha256 (base/sha256.h): the FIPS 180-4 test vectors, incremental updates equal one update,
// and the object starts over after a digest.
#include <gtest/gtest.h>

#include <string>

#include "base/sha256.h"

namespace wick::base {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAndRestartsAfterADigest) {
  Sha256 h;
  h.update("ab").update(std::string_view("c"));
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
  EXPECT_EQ(h.hex_digest(), sha256_hex(""));  // started over
  const char bytes[] = {'a', 'b', 'c'};
  EXPECT_EQ(Sha256().update(bytes, 1).update(bytes + 1, 2).hex_digest(), sha256_hex("abc"));
}

}  // namespace
}  // namespace wick::base
