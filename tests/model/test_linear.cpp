// model::apply_all (model/linear.h): independent products of one pass, the dense ones as one pool
// job, give each what the Linear's own apply() gives, bit for bit, with non-dense Linears (INT8
// weights quantised at load) among them.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/int8_matmul.h"
#include "model/int8_linear.h"
#include "model/linear.h"
#include "test_util.h"

namespace wick::model {
namespace {

using test::random_normal;
using test::test_pool;

TEST(Linear, ApplyAllEqualsEachApplyAlone) {
  const int64_t in = 96;
  std::vector<std::unique_ptr<Linear>> linears;
  linears.push_back(DenseLinear::owned_f32(random_normal(64 * in, 1), 64, in));
  const std::vector<float> q_src = random_normal(40 * in, 2);
  linears.push_back(std::make_unique<Int8Linear>(kernels::quantize_matrix_int8(
      kernels::MatrixRef{q_src.data(), DType::F32, 40, in}, test_pool())));
  linears.push_back(DenseLinear::owned_f32(random_normal(130 * in, 3), 130, in));
  ASSERT_NE(linears[0]->dense_matrix(), nullptr);
  ASSERT_EQ(linears[1]->dense_matrix(), nullptr);  // runs on its own, through apply()
  for (const int64_t T : {int64_t{1}, int64_t{9}}) {
    std::vector<std::vector<float>> xs, alone, together;
    std::vector<LinearCall> calls;
    for (size_t i = 0; i < linears.size(); ++i) {
      const Linear& L = *linears[i];
      xs.push_back(random_normal(static_cast<size_t>(T * in), 10 + static_cast<uint32_t>(i)));
      alone.emplace_back(static_cast<size_t>(T * L.out_features()));
      together.emplace_back(alone.back().size(), -1.f);
      L.apply(xs[i].data(), T, alone[i].data(), test_pool());
    }
    for (size_t i = 0; i < linears.size(); ++i)
      calls.push_back({linears[i].get(), xs[i].data(), together[i].data()});
    apply_all(calls, T, test_pool());
    for (size_t i = 0; i < linears.size(); ++i)
      EXPECT_EQ(std::memcmp(alone[i].data(), together[i].data(), alone[i].size() * 4), 0)
          << "Linear " << i << ", T = " << T;
    // The comparison can fail: another input for the last Linear changes its outputs only.
    xs[2][0] += 1.f;
    apply_all(calls, T, test_pool());
    EXPECT_NE(std::memcmp(alone[2].data(), together[2].data(), alone[2].size() * 4), 0);
    EXPECT_EQ(std::memcmp(alone[1].data(), together[1].data(), alone[1].size() * 4), 0);
    EXPECT_EQ(std::memcmp(alone[0].data(), together[0].data(), alone[0].size() * 4), 0);
  }
}

}  // namespace
}  // namespace wick::model
