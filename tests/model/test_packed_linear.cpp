// PackedLinear (model/quant_linear.h), the Linear of .rwkvq projections, on a tensor of
// rwkv-quant's fixture file: apply() is the exact product (kernels::qmatmul), and
// apply_int8_inputs() - what Precision::kInt8 calls - runs the integer kernel on the codes for
// sb6 and sym weights (not the exact product of the rounded floats, which it stays close to).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "test_util.h"
#include "io/mapped_file.h"
#include "kernels/int8_inputs.h"
#include "kernels/qmatmul.h"
#include "model/quant_linear.h"
#include "quant/dequant.h"
#include "quant/rwkvq.h"

namespace wick::test {
namespace {

void check_tensor(const quant::RwkvqFile& f, const char* key, quant::Layout layout, int bits) {
  SCOPED_TRACE(key);
  const quant::QuantTensor& t = *f.find(key);
  ASSERT_EQ(t.layout, layout);
  ASSERT_EQ(t.bits, bits);
  const model::PackedLinear L(t, nullptr);
  const int64_t T = 3, in = L.in_features(), out = L.out_features();
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(T * in);
  for (float& v : x) v = nd(rng);
  std::vector<int8_t> codes(T * in);
  std::vector<float> scales(T * kernels::int8_input_blocks(in)), rounded(T * in);
  kernels::round_inputs_int8(x.data(), T, in, codes.data(), scales.data(), test_pool());
  const kernels::Int8Inputs xq{codes.data(), scales.data(), T, in};
  kernels::int8_inputs_as_floats(xq, rounded.data(), test_pool());
  std::vector<float> y(T * out), exact(T * out), want(T * out), scratch(T * in);
  L.apply_int8_inputs(xq, scratch.data(), y.data(), test_pool());
  L.apply(rounded.data(), T, exact.data(), test_pool());
  if (layout == quant::Layout::kSb6) {
    kernels::Sb6Matrix w = quant::sb6_matrix(t);
    const std::vector<uint16_t> sm = kernels::unpack_sb6_scales(w);
    w.sm = sm.data();
    const std::vector<uint8_t> hb = kernels::attach_int8_high_bits(w);
    kernels::qmatmul_int8_inputs(w, xq, want.data(), test_pool());
  } else {
    kernels::SymMatrix w = quant::sym_matrix(t);
    const std::vector<uint8_t> hb = kernels::attach_int8_high_bits(w);
    kernels::qmatmul_int8_inputs(w, xq, want.data(), test_pool());
  }
  EXPECT_NE(std::memcmp(y.data(), exact.data(), y.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0);
  EXPECT_LE(max_abs_diff(y, exact), 1e-3 * (1 + max_abs_diff(exact, std::vector<float>(T * out))));
}

TEST(PackedLinear, Int8InputsRunTheIntegerKernelOfTheCodes) {
  const auto compression = quant::RwkvqFile::open(
      io::MappedFile::open(fixture("rwkvq/tiny_compression.rwkvq")));
  check_tensor(compression, "blocks.0.att.key.weight", quant::Layout::kSb6, 5);
  check_tensor(compression, "blocks.0.ffn.key.weight", quant::Layout::kSb6, 4);
  const auto reduction =
      quant::RwkvqFile::open(io::MappedFile::open(fixture("rwkvq/tiny_reduction.rwkvq")));
  check_tensor(reduction, "blocks.0.att.key.weight", quant::Layout::kSym, 8);
  check_tensor(reduction, "blocks.0.ffn.key.weight", quant::Layout::kSym, 6);
}

}  // namespace
}  // namespace wick::test
