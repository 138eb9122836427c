// The same tiny model stored under each naming convention (docs/naming.md) and container must give
// bit-identical logits and states.
#include <gtest/gtest.h>

#include <cstring>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors_writer.h"
#include "model/fixture_case.h"
#include "wick/errors.h"
#include "test_util.h"
#include "wick/model.h"

namespace wick::test {
namespace {

struct Loaded {
  std::vector<float> logits;
  State state;
};

Loaded run(const Model& m, const std::vector<int32_t>& tokens) {
  Loaded r{{}, m.new_state()};
  r.logits = m.forward(tokens, r.state, true);
  return r;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Conventions, EveryConventionAndContainerGivesBitIdenticalLogits) {
  io::TensorSet data = load_fixture_tensors("tiny-rwkv7/seq64.safetensors");
  const std::vector<int32_t> tokens = ints(data, "tokens");
  Model official = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  const Loaded ref = run(official, tokens);
  EXPECT_LE(max_abs_diff(ref.logits, floats(data, "logits")), 1e-5);

  struct Alt {
    const char* path;
    NamingConvention convention;
    const char* container;
  };
  const Alt alts[] = {
      {"tiny-rwkv7/tiny-rwkv7-834K.pth", NamingConvention::kOfficial, "pth"},
      {"tiny-rwkv7/hf", NamingConvention::kHuggingFace, "hf-folder"},
      {"tiny-rwkv7/hf/model.safetensors", NamingConvention::kHuggingFace, "safetensors"},
      {"tiny-rwkv7/tiny-rwkv7-834K.x070.safetensors", NamingConvention::kTmixCmix, "safetensors"},
  };
  for (const Alt& alt : alts) {
    Model m = Model::load(fixture(alt.path));
    EXPECT_EQ(m.geometry(), official.geometry()) << alt.path;
    EXPECT_EQ(m.info().convention, alt.convention) << alt.path;
    EXPECT_EQ(m.info().container, alt.container) << alt.path;
    EXPECT_EQ(m.info().parameters, official.info().parameters) << alt.path;
    const Loaded got = run(m, tokens);
    EXPECT_TRUE(bit_identical(got.logits, ref.logits)) << alt.path;
    EXPECT_TRUE(got.state == ref.state) << alt.path;
  }
}

TEST(Conventions, EmbeddedDefaultModelIsTheTinyModel) {
  Model def = Model::load_default();
  Model file = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  EXPECT_EQ(def.geometry(), file.geometry());
  const std::vector<int32_t> tokens{34, 105, 110};
  EXPECT_TRUE(bit_identical(run(def, tokens).logits, run(file, tokens).logits));
  // and the copy in models/ is that same file
  EXPECT_EQ(read_file(std::string(WICK_SOURCE_DIR) + "/models/tiny-rwkv7-834K.safetensors"),
            read_file(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors")));
}

TEST(Conventions, GeometryFromShapes) {
  Model m = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors"));
  const Geometry& g = m.geometry();
  EXPECT_EQ(g.n_layer, 12);
  EXPECT_EQ(g.n_embd, 64);
  EXPECT_EQ(g.n_head, 4);
  EXPECT_EQ(g.head_size, 16);
  EXPECT_EQ(g.ffn_dim, 256);
  EXPECT_EQ(g.vocab, 256);
  EXPECT_EQ(g.lora_w, 32);
  EXPECT_EQ(g.lora_a, 32);
  EXPECT_EQ(g.lora_v, 32);
  EXPECT_EQ(g.lora_g, 32);
  EXPECT_EQ(m.info().parameters, 829888u);
  Model w = Model::load(fixture("rwkvq/tiny_world_dense.safetensors"));
  EXPECT_EQ(w.geometry().n_layer, 2);
  EXPECT_EQ(w.geometry().n_embd, 256);
  EXPECT_EQ(w.geometry().n_head, 4);
  EXPECT_EQ(w.geometry().head_size, 64);
  EXPECT_EQ(w.geometry().ffn_dim, 512);
  EXPECT_EQ(w.geometry().lora_w, 96);
  EXPECT_EQ(w.geometry().lora_a, 32);
  EXPECT_EQ(w.geometry().lora_v, 32);
  EXPECT_EQ(w.geometry().lora_g, 32);
}

// HF folders with sharded weights (model.safetensors.index.json + model-0000k-of-0000n files).
TEST(Conventions, ShardedHuggingFaceFolderLoadsBitIdentically) {
  io::TensorSet src = load_fixture_tensors("tiny-rwkv7/hf/model.safetensors");
  const auto dir = scratch_dir();
  std::filesystem::copy_file(fixture("tiny-rwkv7/hf/config.json"), dir / "config.json");
  std::vector<io::TensorToWrite> a, b;
  nlohmann::json map = nlohmann::json::object();
  size_t i = 0;
  for (const io::TensorView& t : src.tensors()) {
    const bool first = i++ % 2 == 0;
    (first ? a : b).push_back({t.name, t.dtype, t.shape,
                               std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
    map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  io::write_safetensors((dir / "model-00001-of-00002.safetensors").string(), a);
  io::write_safetensors((dir / "model-00002-of-00002.safetensors").string(), b);
  write_file(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());

  Model sharded = Model::load(dir.string());
  Model whole = Model::load(fixture("tiny-rwkv7/hf"));
  EXPECT_EQ(sharded.info().container, "hf-folder (sharded)");
  const std::vector<int32_t> tokens{34, 105, 110};
  EXPECT_TRUE(bit_identical(run(sharded, tokens).logits, run(whole, tokens).logits));

  // An index that points a tensor at the wrong shard is refused, naming the shard and tensor.
  map["lm_head.weight"] = map["lm_head.weight"] == "model-00001-of-00002.safetensors"
                              ? "model-00002-of-00002.safetensors"
                              : "model-00001-of-00002.safetensors";
  write_file(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  try {
    Model::load(dir.string());
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.tensor(), "lm_head.weight");
    EXPECT_NE(std::string(e.what()).find("model-0000"), std::string::npos) << e.what();
  }
  // A shard path escaping the folder is refused.
  map["lm_head.weight"] = "../elsewhere.safetensors";
  write_file(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  EXPECT_THROW(Model::load(dir.string()), FormatError);
}

}  // namespace
}  // namespace wick::test
