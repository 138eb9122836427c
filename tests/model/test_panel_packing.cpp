// Packing a loaded model's projections into panels (model/panel_packing.h): which matrices are
// packed and which stay row-major, that the packed model agrees with the row-major one to
// rounding and with the reference logits, and that its passes stay exact (a forward pass's rows
// equal the recurrent steps bit for bit, a batch row equals the row alone).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "model/int8_linear.h"
#include "model/linear.h"
#include "model/model_impl.h"
#include "model/panel_packing.h"
#include "smaps_util.h"
#include "test_util.h"
#include "wick/model.h"
#include "wick/synth.h"

namespace wick {
namespace {

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";

// Nothing is packed under the scalar kernels (model/panel_packing.h).
#define SKIP_UNDER_SCALAR_KERNELS()                                                    \
  if (kernels::active_isa() == kernels::Isa::kScalar)                                 \
  GTEST_SKIP() << "the scalar kernels pack nothing (WICK_ISA=scalar or a CPU without AVX2)"

kernels::MatrixLayout layout_of(const model::Linear& L) {
  const kernels::MatrixRef* m = L.dense_matrix();
  EXPECT_NE(m, nullptr);
  return m ? m->layout : kernels::MatrixLayout::kRows;
}

std::shared_ptr<Model::Impl> fixture_impl() {
  auto mapped = io::MappedFile::open(test::fixture(kModel));
  return model::build_model(io::read_safetensors(mapped), "", "");
}

TEST(PanelPacking, PacksEveryProjectionTheHeadAndTheLoraFactors) {
  SKIP_UNDER_SCALAR_KERNELS();
  auto impl = fixture_impl();
  model::ModelWeights& w = impl->weights;
  const std::vector<model::Int8Target> all = model::table_linears(w);
  // 12 blocks: 6 projections and 8 LoRA factors each (no v1 / v2 in block 0), and the head.
  ASSERT_EQ(all.size(), 12u * (6 + 8) - 2 + 1);
  ASSERT_EQ(model::int8_targets(w).size(), 12u * 6 + 1);
  uint64_t want = 0;
  for (const model::Int8Target& t : all) {
    EXPECT_EQ(layout_of(**t.slot), kernels::MatrixLayout::kRows) << t.name;
    want += static_cast<uint64_t>((*t.slot)->out_features() * (*t.slot)->in_features());
  }
  EXPECT_EQ(model::pack_model_panels(*impl, Precision::kFp32, test::test_pool()), want);
  for (const model::Int8Target& t : all)
    EXPECT_EQ(layout_of(**t.slot), kernels::MatrixLayout::kPanels) << t.name;
  for (const model::LayerWeights& L : w.layers)
    for (const auto* lin : {&L.w1, &L.w2, &L.a1, &L.a2, &L.g1, &L.g2})
      EXPECT_EQ(layout_of(**lin), kernels::MatrixLayout::kPanels);
  // Packed already: a second call packs nothing.
  EXPECT_EQ(model::pack_model_panels(*impl, Precision::kFp32, test::test_pool()), 0u);
}

// The loaded (packed) model against the same checkpoint built row-major: the logits agree to
// rounding but not in bits (another order of summation), and differ for another prompt; the
// packed model's parallel pass equals its recurrent steps bit for bit.
TEST(PanelPacking, AgreesWithTheRowMajorModelToRoundingAndItsPassesStayExact) {
  SKIP_UNDER_SCALAR_KERNELS();
  const Model packed = Model::load(test::fixture(kModel));
  const Model rows = Model::from_impl(fixture_impl());
  LoadOptions unpacked;
  unpacked.pack_weights = false;
  const Model loaded_rows = Model::load(test::fixture(kModel), unpacked);
  const std::vector<int32_t> ids = {3, 17, 99, 4, 250, 61, 7};
  State a = packed.new_state(), b = rows.new_state();
  const std::vector<float> la = packed.forward(ids, a), lb = rows.forward(ids, b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_LT(test::max_abs_diff(la, lb), 1e-5);
  EXPECT_NE(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  // pack_weights = false: the row-major model, bit for bit.
  State e = loaded_rows.new_state();
  const std::vector<float> le = loaded_rows.forward(ids, e);
  EXPECT_EQ(std::memcmp(le.data(), lb.data(), lb.size() * sizeof(float)), 0);
  State c = packed.new_state();
  std::vector<float> stepped;
  for (int32_t id : ids) stepped = packed.step(id, c);
  ASSERT_EQ(stepped.size(), la.size());
  EXPECT_EQ(std::memcmp(stepped.data(), la.data(), la.size() * sizeof(float)), 0);
  std::vector<int32_t> other = ids;
  other.back() = 8;
  State d = packed.new_state();
  EXPECT_GT(test::max_abs_diff(packed.forward(other, d), la), 1e-4);
}

// bf16 weights stay row-major for a bf16-precision model where the CPU has the BF16 dot product
// (it reads rows), and are packed otherwise.
TEST(PanelPacking, Bf16RowsStayForTheBf16DotProductOnly) {
  SKIP_UNDER_SCALAR_KERNELS();
  const std::string path = (test::scratch_dir() / "panels-bf16.safetensors").string();
  write_synthetic_checkpoint(path, parse_synth_geometry("1:64:256"), DType::BF16, 3);
  auto build = [&] {
    auto mapped = io::MappedFile::open(path);
    return model::build_model(io::read_safetensors(mapped), "", "");
  };
  const bool bf16_dot = kernels::bf16_dot_kernels() != nullptr;
  auto at_bf16 = build();
  model::pack_model_panels(*at_bf16, Precision::kBf16, test::test_pool());
  auto at_fp32 = build();
  model::pack_model_panels(*at_fp32, Precision::kFp32, test::test_pool());
  for (const model::Int8Target& t : model::table_linears(at_bf16->weights))
    EXPECT_EQ(layout_of(**t.slot),
              bf16_dot ? kernels::MatrixLayout::kRows : kernels::MatrixLayout::kPanels)
        << t.name;
  for (const model::Int8Target& t : model::table_linears(at_fp32->weights))
    EXPECT_EQ(layout_of(**t.slot), kernels::MatrixLayout::kPanels) << t.name;
}

// Packing gives back the mapped file's pages of each matrix it packs: with a 16 MiB fp32 head (and
// 16 MiB embedding table), the file's resident bytes after load and a step are at least the head's
// bytes fewer when packed than when not, while the unpacked model holds the head resident. Both
// models compute the same token's logits to rounding.
TEST(PanelPacking, TheFilePagesOfPackedMatricesAreGivenBack) {
  SKIP_UNDER_SCALAR_KERNELS();
  const std::string path = (test::scratch_dir() / "panels-release.safetensors").string();
  write_synthetic_checkpoint(path, parse_synth_geometry("1:64:65536"), DType::F32, 7);
  const std::string canonical = std::filesystem::canonical(path).string();
  constexpr uint64_t kHeadBytes = uint64_t{65536} * 64 * 4;
  const auto file_rss = [&] {
    const test::FileMappings maps = test::mappings_of_file(canonical, "");
    return test::FileMappings::rss_bytes(maps.with) + test::FileMappings::rss_bytes(maps.without);
  };
  std::vector<float> logits[2];
  uint64_t rss[2] = {0, 0};
  for (const bool pack : {false, true}) {
    LoadOptions o;
    o.pack_weights = pack;
    const Model m = Model::load(path, o);
    State s = m.new_state();
    logits[pack] = m.step(1234, s);
    rss[pack] = file_rss();
  }
  EXPECT_GE(rss[false], kHeadBytes) << "the unpacked model reads its head from the mapping";
  EXPECT_LE(rss[true] + kHeadBytes, rss[false])
      << "packed: " << rss[true] << " resident bytes of the file, unpacked: " << rss[false];
  EXPECT_LT(test::max_abs_diff(logits[true], logits[false]), 1e-5);
  EXPECT_NE(std::memcmp(logits[true].data(), logits[false].data(), 4 * logits[true].size()), 0);
}

// The time-mix LoRA factors of an official bf16 file are stored transposed, so the model holds
// them as copies (then packs those): whether packed or not, none of the whole pages inside any
// factor's bytes in the file is mapped in this process after load (the loader gives them back),
// nor, packed, after a step. The control: the unpacked model's projections, borrowed from the
// mapping (and read at load for the fingerprint), have their pages mapped. The unpacked model is
// checked before its step: reading its projections may map neighbouring pages back in (the
// kernel maps a fault's surroundings that are in the page cache), which says nothing of the
// loader. (C = 1024 makes each factor 128-320 KiB: whole pages.)
TEST(PanelPacking, TheFilePagesOfLoraFactorsHeldAsCopiesAreGivenBack) {
  SKIP_UNDER_SCALAR_KERNELS();
  const std::string path = (test::scratch_dir() / "panels-lora-bf16.safetensors").string();
  write_synthetic_checkpoint(path, parse_synth_geometry("2:1024:256"), DType::BF16, 5);
  const std::string canonical = std::filesystem::canonical(path).string();
  // Each factor's offset in the file and its bytes, and a projection's (read through a mapping
  // closed again before the model maps the file, so the model's mappings are the only ones).
  struct Range {
    std::string name;
    size_t offset, bytes;
  };
  std::vector<Range> factors;
  Range projection{};
  {
    auto mapped = io::MappedFile::open(path);
    const io::TensorSet ts = io::read_safetensors(mapped);
    for (const io::TensorView& t : ts.tensors()) {
      const std::string& n = t.name;
      const Range at{n, static_cast<size_t>(t.data - mapped->data()), t.nbytes};
      if (n == "blocks.1.att.receptance.weight") projection = at;
      const size_t dot = n.rfind('.');
      const std::string leaf = dot == std::string::npos ? n : n.substr(dot + 1);
      if (n.find(".att.") == std::string::npos || leaf.size() != 2 ||
          std::string("wavg").find(leaf[0]) == std::string::npos ||
          (leaf[1] != '1' && leaf[1] != '2'))
        continue;
      if (n.rfind("blocks.0.att.v", 0) == 0) continue;  // layer 0's value LoRA: never read
      ASSERT_EQ(t.dtype, DType::BF16) << n;
      factors.push_back(at);
    }
  }
  ASSERT_EQ(factors.size(), 14u) << "w1 w2 a1 a2 g1 g2 per layer, v1 v2 in layer 1";
  ASSERT_FALSE(projection.name.empty());
  if (test::present_pages(factors.data(), 8192) < 0)
    GTEST_SKIP() << "/proc/self/pagemap cannot be read here";
  for (const bool pack : {false, true}) {
    LoadOptions o;
    o.pack_weights = pack;
    const Model m = Model::load(path, o);
    // The pages of r mapped: the model's mapping is split into several by its advice, each part
    // with its file offset.
    const auto present = [&](const Range& r) -> int64_t {
      const test::FileMappings maps = test::mappings_of_file(canonical, "");
      std::vector<test::SmapsMapping> all = maps.with;
      all.insert(all.end(), maps.without.begin(), maps.without.end());
      for (const test::SmapsMapping& mp : all)
        if (r.offset >= mp.offset && r.offset + r.bytes <= mp.offset + (mp.hi - mp.lo))
          return test::present_pages(
              reinterpret_cast<const uint8_t*>(mp.lo) + (r.offset - mp.offset), r.bytes);
      ADD_FAILURE() << r.name << " lies in no single mapping of the file";
      return -1;
    };
    const auto factors_given_back = [&](const char* when) {
      for (const Range& f : factors)
        EXPECT_EQ(present(f), 0) << f.name << " (packed " << pack << ", " << when
                                 << "): pages still mapped";
    };
    factors_given_back("after load");
    if (pack)
      EXPECT_EQ(present(projection), 0) << "a packed projection's pages are given back";
    else
      EXPECT_GT(present(projection), 0) << "the unpacked model reads its projection from the mapping";
    if (!pack) continue;
    State s = m.new_state();
    (void)m.step(77, s);
    factors_given_back("after a step");
  }
}

}  // namespace
}  // namespace wick
