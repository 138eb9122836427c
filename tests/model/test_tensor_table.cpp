// The tensor table (model/tensor_table.h) against checkpoints no one here wrote: every row names
// a tensor of the official state dict with exactly the shape the row derives, and every tensor of
// the file is a row.
#include <gtest/gtest.h>

#include <set>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "model/tensor_table.h"
#include "test_util.h"
#include "wick/model.h"

namespace wick::model {
namespace {

using namespace wick::test;

// Checks the rows of `table` under `prefix` against `set`; adds the names it found to `seen`.
template <class W>
void expect_rows(std::span<const TensorSpec<W>> table, const std::string& prefix,
                 const io::TensorSet& set, const Geometry& g, std::set<std::string>& seen,
                 int layer = -1) {
  for (const TensorSpec<W>& s : table) {
    if (layer == 0 && s.presence == Presence::kAfterLayer0) continue;  // absent in this export
    const std::string name = prefix + std::string(s.name);
    const io::TensorView* t = set.find(name);
    if (t == nullptr) {
      ADD_FAILURE() << "the table's row " << name << " is not in " << set.source();
      continue;
    }
    EXPECT_EQ(t->shape, official_shape(s, g)) << name;
    seen.insert(name);
  }
}

TEST(TensorTable, RowsAreTheOfficialStateDict) {
  const io::TensorSet set = load_fixture_tensors("tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors");
  Geometry g = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors")).geometry();
  ASSERT_EQ(g.n_head, 4);  // a geometry where H != C / 64 and D_w == D_a: shapes are telling
  std::set<std::string> seen;
  expect_rows(model_tensors(), "", set, g, seen);
  for (int i = 0; i < g.n_layer; ++i)
    expect_rows(layer_tensors(), "blocks." + std::to_string(i) + ".", set, g, seen, i);
  for (const io::TensorView& t : set.tensors()) EXPECT_TRUE(seen.count(t.name)) << t.name;
  EXPECT_EQ(seen.size(), set.size());

  // A wrong letter is visible: the same rows with F and C swapped do not match the file.
  Geometry swapped = g;
  std::swap(swapped.ffn_dim, swapped.n_embd);
  int mismatches = 0;
  for (const LayerSpec& s : layer_tensors()) {
    if (set.find("blocks.1." + std::string(s.name))->shape != official_shape(s, swapped))
      ++mismatches;
  }
  EXPECT_EQ(mismatches, static_cast<int>(layer_tensors().size()) - 1);  // all but r_k [H, N]
}

TEST(TensorTable, AttentionRowsAreTheRwkvXBlocks) {
  const io::TensorSet set = load_fixture_tensors("rwkvx/rwkvx-tiny.safetensors");
  const Geometry g = Model::load(fixture("rwkvx/rwkvx-tiny.safetensors")).geometry();
  ASSERT_GT(g.n_attn, 0);
  std::set<std::string> seen;
  for (int j = 0; j < g.n_attn; ++j)
    expect_rows(attention_tensors(), "moba." + std::to_string(j) + ".", set, g, seen);
  for (const io::TensorView& t : set.tensors())
    if (t.name.rfind("moba.", 0) == 0) EXPECT_TRUE(seen.count(t.name)) << t.name;
}

TEST(TensorTable, Int8RowsAreTheProjectionsAndTheHead) {
  int int8_rows = 0;
  for (const LayerSpec& s : layer_tensors()) {
    EXPECT_EQ(s.int8, s.role == Role::kProjection) << s.name;
    EXPECT_EQ(!s.trace.empty(), s.role == Role::kProjection) << s.name;
    EXPECT_EQ(s.vec == nullptr, s.lin != nullptr) << s.name;  // exactly one slot
    int8_rows += s.int8;
  }
  EXPECT_EQ(int8_rows, 6);
  for (const AttentionSpec& s : attention_tensors()) EXPECT_EQ(s.int8, s.role == Role::kProjection);
  for (const ModelSpec& s : model_tensors()) EXPECT_EQ(s.int8, s.name == "head.weight") << s.name;
}

}  // namespace
}  // namespace wick::model
