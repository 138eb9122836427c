// WICK_CHECK (base/check.h): silent when the condition holds, evaluated once; on failure a
// wick::InternalError naming the file, the line, the condition and the reason - also from the
// kernels' entry points, which used to end the process with a bare trap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/int8_matmul.h"
#include "kernels/matmul.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick {
namespace {

TEST(WickCheck, PassesSilentlyAndEvaluatesTheConditionOnce) {
  int calls = 0;
  auto once = [&] { return ++calls > 0; };
  WICK_CHECK(once(), "never fails");
  EXPECT_EQ(calls, 1);
}

TEST(WickCheck, FailureNamesFileLineConditionAndReason) {
  const int line = __LINE__ + 2;
  try {
    WICK_CHECK(1 + 1 == 3, "arithmetic holds");
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test_check.cpp:" + std::to_string(line)), std::string::npos) << m;
    EXPECT_NE(m.find("1 + 1 == 3"), std::string::npos) << m;
    EXPECT_NE(m.find("arithmetic holds"), std::string::npos) << m;
    EXPECT_NE(m.find("bug in wick"), std::string::npos) << m;
  }
  // An InternalError is a wick::Error (one type to catch) of its own kind.
  EXPECT_THROW(WICK_CHECK(false, "x"), Error);
}

TEST(WickCheck, KernelEntryPointsThrowInsteadOfTrapping) {
  std::vector<float> w(4 * 8, 0.5f), x(8, 1.0f), y(4);
  // A matrix dtype the loader never builds.
  const kernels::MatrixRef bad{w.data(), DType::I8, 4, 8};
  EXPECT_THROW(kernels::matmul(bad, x.data(), 1, y.data(), test::test_pool()), InternalError);
  // An int8 view whose stride does not fit its columns.
  kernels::Int8Weights q =
      kernels::quantize_matrix_int8({w.data(), DType::F32, 4, 8}, test::test_pool());
  kernels::Int8Matrix v = q.view();
  v.stride = 8;
  EXPECT_THROW(kernels::int8_matmul(v, x.data(), 1, y.data(), test::test_pool()), InternalError);
  // The valid ones run.
  kernels::matmul({w.data(), DType::F32, 4, 8}, x.data(), 1, y.data(), test::test_pool());
  EXPECT_FLOAT_EQ(y[0], 4.0f);
  kernels::int8_matmul(q.view(), x.data(), 1, y.data(), test::test_pool());
  EXPECT_NEAR(y[0], 4.0f, 0.05f);
}

}  // namespace
}  // namespace wick
