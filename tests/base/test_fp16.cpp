// base/fp16.h: the scalar fp16 / bf16 conversions. Every fp16 pattern widens exactly and narrows
// back to itself (NaNs aside); bf16 widening is the top half of the fp32; ties go to even.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/fp16.h"

namespace wick::base {
namespace {

TEST(Fp16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float f = f16_to_f32(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), b) << std::hex << h;
    ASSERT_EQ(round_to_half(f), f) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));  // smallest subnormal, not flushed
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);                     // rounds to infinity
  EXPECT_EQ(f32_to_f16(1.f + std::ldexp(1.f, -11)), 0x3c00);  // tie to even
  const uint8_t bytes[] = {0xff, 0x00, 0x3c, 0x00};  // f16_at reads unaligned little-endian
  EXPECT_EQ(f16_at(bytes + 1, 0), 1.0f);
}

TEST(Bf16, WideningIsExactAndNarrowingRoundsToEven) {
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const auto b = static_cast<uint16_t>(h);
    EXPECT_EQ(std::bit_cast<uint32_t>(bf16_to_f32(b)), h << 16);
    if (!std::isnan(bf16_to_f32(b))) EXPECT_EQ(f32_to_bf16(bf16_to_f32(b)), b);
  }
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);            // tie, even stays
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  float y[2];
  const float x[2] = {1.0f + 0x1p-8f + 0x1p-20f, -2.0f};
  round_to_bf16(x, y, 2);
  EXPECT_EQ(y[0], bf16_to_f32(0x3f81));
  EXPECT_EQ(y[1], -2.0f);
}

}  // namespace
}  // namespace wick::base
