// The one checkpoint opener (io/checkpoint.h), seen from its users: the model loader and the
// quantiser read the same containers and refuse the same foreign formats with the same words.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "tasks/quantize_file.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"

namespace wick {
namespace {

namespace fs = std::filesystem;
using namespace wick::test;

// The tiny fixture model split into two shards, tensors alternating, in the order of their bytes.
fs::path write_sharded_copy(const std::string& rel) {
  io::TensorSet src = load_fixture_tensors(rel);
  std::vector<const io::TensorView*> order;
  for (const io::TensorView& t : src.tensors()) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const io::TensorView* a, const io::TensorView* b) { return a->data < b->data; });
  const fs::path dir = scratch_dir();
  write_file(dir / "config.json", "{}");
  std::vector<io::TensorToWrite> first, second;
  nlohmann::json map = nlohmann::json::object();
  for (size_t i = 0; i < order.size(); ++i) {
    const io::TensorView& t = *order[i];
    const bool a = i < order.size() / 2;  // the first half of the file's bytes, then the rest
    (a ? first : second)
        .push_back({t.name, t.dtype, t.shape,
                    std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
    map[t.name] = a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  io::write_safetensors((dir / "model-00001-of-00002.safetensors").string(), first);
  io::write_safetensors((dir / "model-00002-of-00002.safetensors").string(), second);
  write_file(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
  return dir;
}

TEST(CheckpointOpener, QuantiserReadsShardedFoldersLikeTheWholeFile) {
  const std::string rel = "rwkvq/tiny_world_dense.safetensors";
  const fs::path dir = write_sharded_copy(rel);
  const io::Checkpoint ck = io::open_checkpoint(dir.string());
  EXPECT_EQ(ck.container, "hf-folder (sharded)");

  const fs::path out = dir / "quantised";
  fs::create_directories(out);
  quant::FileQuantizeOptions options;
  options.config = quant::QuantConfig::plain("sb6", 4);
  options.label = "sb6:4";
  quant::quantize_checkpoint(fixture(rel), (out / "whole.rwkvq").string(), options);
  quant::quantize_checkpoint(dir.string(), (out / "sharded.rwkvq").string(), options);
  // Same tensors in the same order: the same file, byte for byte.
  EXPECT_EQ(read_file(out / "whole.rwkvq"), read_file(out / "sharded.rwkvq"));
  // and a different layout gives a different file
  options.config = quant::QuantConfig::plain("sym", 8);
  options.label = "sym:8";
  quant::quantize_checkpoint(dir.string(), (out / "sym8.rwkvq").string(), options);
  EXPECT_NE(read_file(out / "whole.rwkvq"), read_file(out / "sym8.rwkvq"));
}

TEST(CheckpointOpener, LoaderAndQuantiserRefuseForeignFormatsAlike) {
  const fs::path dir = scratch_dir();
  const std::pair<const char*, std::string> cases[] = {
      {"model.gguf", std::string("GGUF\x03\0\0\0", 8) + std::string(64, '\0')},
      {"model.bin", std::string("fmgg") + std::string(64, '\0')},
      {"old.pth", std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46", 8) + std::string(64, '\0')},
      {"text.pth", "these are not weights\n"}};
  std::set<std::string> messages;
  for (const auto& [name, bytes] : cases) {
    const std::string path = (dir / name).string();
    write_file(path, bytes);
    std::string from_loader, from_quantiser;
    try {
      Model::load(path);
    } catch (const CheckpointError& e) {
      from_loader = e.what();
    }
    try {
      quant::FileQuantizeOptions options;
      options.config = quant::QuantConfig::plain("sb6", 4);
      quant::quantize_checkpoint(path, (dir / "out.rwkvq").string(), options);
    } catch (const CheckpointError& e) {
      from_quantiser = e.what();
    }
    EXPECT_FALSE(from_loader.empty()) << name;
    EXPECT_EQ(from_loader, from_quantiser) << name;
    messages.insert(from_loader.substr(from_loader.find(name) + std::string(name).size()));
  }
  // Each format is named by its own refusal: four different messages after the file's path.
  EXPECT_EQ(messages.size(), std::size(cases));
  EXPECT_FALSE(fs::exists(dir / "out.rwkvq"));
}

TEST(CheckpointOpener, FoldersNeedConfigAndWeights) {
  const fs::path dir = scratch_dir();
  EXPECT_THROW(io::open_checkpoint(dir.string()), FileError);  // no config.json
  write_file(dir / "config.json", "{}");
  try {
    io::open_checkpoint(dir.string());
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wick
