// base::shape_string, the one way a tensor shape is written in messages (base/strings.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/strings.h"
#include "io/tensor_set.h"

namespace wick::base {
namespace {

TEST(ShapeString, WritesBracketedCommaSeparatedDimensions) {
  EXPECT_EQ(shape_string(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{7}), "[7]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{-1, 0, INT64_MAX}), "[-1, 0, 9223372036854775807]");
  // TensorView's method is the same text.
  io::TensorView v{"x", DType::F32, {65536, 768}};
  EXPECT_EQ(v.shape_string(), "[65536, 768]");
}

}  // namespace
}  // namespace wick::base
