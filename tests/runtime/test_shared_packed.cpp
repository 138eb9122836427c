// Shared packed weights (model/quant_linear.h PackedLinear) under concurrent use: a 5-bit sb6
// projection makes its rearranged planes on its first integer product (std::call_once), so the
// first products of two sequences running at once on two threads race for it. Both must get the
// bits a lone first product gets (ThreadSanitizer runs this file: tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"
#include "io/mapped_file.h"
#include "kernels/int8_inputs.h"
#include "kernels/thread_pool.h"
#include "model/quant_linear.h"
#include "quant/rwkvq.h"

namespace wick::test {
namespace {

struct Inputs {
  std::vector<int8_t> codes;
  std::vector<float> scales;
  kernels::Int8Inputs view;
};

Inputs rounded_inputs(int64_t T, int64_t in, uint32_t seed, kernels::ThreadPool& pool) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(T * in);
  for (float& v : x) v = nd(rng);
  Inputs r;
  r.codes.resize(T * in);
  r.scales.resize(T * kernels::int8_input_blocks(in));
  kernels::round_inputs_int8(x.data(), T, in, r.codes.data(), r.scales.data(), pool);
  r.view = kernels::Int8Inputs{r.codes.data(), r.scales.data(), T, in};
  return r;
}

TEST(SharedPackedWeights, FirstIntegerProductsOnTwoThreadsGiveTheLoneProductsBits) {
  const auto file = quant::RwkvqFile::open(
      io::MappedFile::open(fixture("rwkvq/tiny_compression.rwkvq")));
  const quant::QuantTensor& t = *file.find("blocks.0.att.key.weight");
  ASSERT_EQ(t.layout, quant::Layout::kSb6);
  ASSERT_EQ(t.bits, 5);
  const int64_t T = 1, in = t.cols(), out = t.rows();
  kernels::ThreadPool pool_a(1), pool_b(1);
  const Inputs xa = rounded_inputs(T, in, 3, pool_a), xb = rounded_inputs(T, in, 4, pool_a);
  // The lone first products, each on its own PackedLinear.
  std::vector<float> want_a(T * out), want_b(T * out), scratch(T * in);
  model::PackedLinear(t, nullptr).apply_int8_inputs(xa.view, scratch.data(), want_a.data(), pool_a);
  model::PackedLinear(t, nullptr).apply_int8_inputs(xb.view, scratch.data(), want_b.data(), pool_a);
  ASSERT_NE(std::memcmp(want_a.data(), want_b.data(), want_a.size() * sizeof(float)), 0);
  for (int round = 0; round < 4; ++round) {
    const model::PackedLinear shared(t, nullptr);
    std::vector<float> ya(T * out), yb(T * out), sa(T * in), sb(T * in);
    std::thread a([&] { shared.apply_int8_inputs(xa.view, sa.data(), ya.data(), pool_a); });
    std::thread b([&] { shared.apply_int8_inputs(xb.view, sb.data(), yb.data(), pool_b); });
    a.join();
    b.join();
    EXPECT_EQ(std::memcmp(ya.data(), want_a.data(), ya.size() * sizeof(float)), 0) << round;
    EXPECT_EQ(std::memcmp(yb.data(), want_b.data(), yb.size() * sizeof(float)), 0) << round;
  }
}

}  // namespace
}  // namespace wick::test
