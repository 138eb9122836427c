// The dense bf16 4-head model of ../shared/fixtures/rwkvq (tiny_world_dense.safetensors, written by
// rwkv-quant's reference RWKV7Ref) computed in fp32 against its reference logits and per-layer
// intermediates (tiny_reference_forward.safetensors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

TEST(RwkvqReference, DenseBf16ModelInFp32MatchesLogitsAndIntermediates) {
  io::TensorSet ref = load_fixture_tensors("rwkvq/tiny_reference_forward.safetensors");
  Model m = Model::load(fixture("rwkvq/tiny_world_dense.safetensors"));
  EXPECT_EQ(m.info().dtype_parameters.size(), 1u);
  EXPECT_EQ(m.info().dtype_parameters[0].first, DType::BF16);
  const std::vector<int32_t> tokens = ints(ref, "tokens");
  std::map<std::string, std::vector<float>> got;
  ActivationTrace trace = [&](std::string_view name, int layer, const float* d, int64_t rows,
                              int64_t cols) {
    got[std::string(name) + "." + std::to_string(layer)].assign(d, d + rows * cols);
  };
  State st = m.new_state();
  std::vector<float> logits = m.forward(tokens, st, true, &trace);
  const double dl = max_abs_diff(logits, floats(ref, "logits.dense_f32"));
  std::printf("[parity] rwkvq dense_f32 logits max-abs %.3g\n", dl);
  EXPECT_LE(dl, 5e-5);
  // The fp32 model is not the bf16-computed one (which is 0.045 away): the test must tell them apart.
  EXPECT_GT(max_abs_diff(logits, floats(ref, "logits.dense_bf16")), 1e-3);

  for (int layer = 0; layer < 2; ++layer) {
    const std::string L = std::to_string(layer);
    const double db = max_abs_diff(got["block_out." + L], floats(ref, "dense_f32.after_block" + L));
    std::printf("[parity] rwkvq after_block%d max-abs %.3g\n", layer, db);
    EXPECT_LE(db, 2e-5) << "after_block" << layer;
    for (const char* name : {"r", "k", "v", "a", "b", "w_logdecay", "wkv_out"}) {
      const std::vector<float> want = floats(ref, "dense_f32.L" + L + "." + name);
      const double d = max_abs_diff(got[std::string(name) + "." + L], want);
      // The WKV read-out grows with the state (|y| up to ~10 here): compare relative to its scale.
      double scale = 1;
      for (float x : want) scale = std::max(scale, static_cast<double>(std::abs(x)));
      std::printf("[parity] rwkvq L%d.%s max-abs %.3g (scale %.3g)\n", layer, name, d, scale);
      EXPECT_LE(d, 1e-5 * scale) << "L" << layer << "." << name;
    }
  }
}

}  // namespace
}  // namespace wick::test
