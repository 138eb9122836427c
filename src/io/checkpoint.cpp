// The one checkpoint opener (io/checkpoint.h).
#include "io/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/json_limits.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An HF folder with sharded weights: model.safetensors.index.json maps each tensor name to a
// shard file in the same folder.
TensorSet read_shards(const std::string& index_path) {
  json index = parse_json_limited(read_text_file(index_path), index_path, "shard index",
                                  JsonLimits{4, 1 << 16});
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw FormatError(index_path, "", "an object with a \"weight_map\" object", index.type_name());
  }
  const fs::path folder = fs::path(index_path).parent_path();
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> tensor names
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) {
      throw FormatError(index_path, it.key(), "a shard file name", brief_json(it.value()));
    }
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      throw FormatError(index_path, it.key(), "a file name inside the model folder",
                        "'" + shard + "'");
    }
    by_shard[shard].insert(it.key());
  }
  TensorSet merged(folder.string());
  for (auto& [shard, wanted] : by_shard) {
    TensorSet part = read_safetensors(MappedFile::open((folder / shard).string()));
    for (const TensorView& t : part.tensors()) {
      if (!wanted.count(t.name)) {
        throw FormatError(part.source(), t.name, "only tensors the index assigns to this shard",
                          "a tensor the index does not list here");
      }
      merged.add(t);
    }
    for (const std::string& name : wanted) {
      if (!part.find(name)) {
        throw FormatError(part.source(), name, "the tensor the index assigns to this shard",
                          "none");
      }
    }
    for (const auto& f : part.files()) merged.keep_alive(f);
  }
  return merged;
}

}  // namespace

std::string read_text_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw FileError(p, "cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void refuse_foreign_formats(const MappedFile& f) {
  const uint8_t* d = f.data();
  const size_t n = f.size();
  if (n >= 4 && std::memcmp(d, "GGUF", 4) == 0) {
    throw CheckpointError(f.path(),
                          "this is a GGUF file (llama.cpp); wick reads safetensors, "
                          "official .pth and HuggingFace folders - use the original "
                          "checkpoint");
  }
  if (n >= 4 && d[0] == 0x66 && d[1] == 0x6d && d[2] == 0x67 && d[3] == 0x67) {
    throw CheckpointError(f.path(),
                          "this is an rwkv.cpp ggml file (magic 'ggmf'); wick reads "
                          "safetensors, official .pth and HuggingFace folders - use the "
                          "original checkpoint");
  }
  // Legacy torch.save: a pickle (protocol 2) starting with the LONG1 magic number
  // 0x1950a86a20f9469cfc6c.
  static const uint8_t kLegacyTorch[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46};
  if (n >= sizeof(kLegacyTorch) && std::memcmp(d, kLegacyTorch, sizeof(kLegacyTorch)) == 0) {
    throw CheckpointError(f.path(),
                          "this is a PyTorch file in the legacy (pre-1.6, non-zip) "
                          "format; re-save it with a current torch.save, which writes "
                          "the zip format wick reads");
  }
}

TensorSet read_tensor_file(std::shared_ptr<MappedFile> file, std::string* container) {
  refuse_foreign_formats(*file);
  if (looks_like_zip(*file)) {
    if (container) *container = "pth";
    return read_pth(std::move(file));
  }
  const std::string ext = fs::path(file->path()).extension().string();
  if (ext == ".pth" || ext == ".pt") {
    // Named like a PyTorch checkpoint but not one: say so, rather than a safetensors error.
    throw CheckpointError(file->path(),
                          "not a PyTorch zip archive: a checkpoint written by "
                          "torch.save (PyTorch 1.6 or later) is a zip file starting "
                          "with \"PK\"; this file is something else (a text file, "
                          "an unfinished download?)");
  }
  // Neither a zip nor a safetensors header (whose JSON starts at byte 8, also in a file cut short
  // inside it, which the safetensors reader then describes): something else entirely.
  if (file->size() >= 9 && file->data()[8] != '{') {
    throw CheckpointError(file->path(),
                          "not a checkpoint: expected a .safetensors file, an "
                          "official .pth (a torch.save zip) or a HuggingFace model "
                          "folder");
  }
  if (container) *container = "safetensors";
  return read_safetensors(std::move(file));
}

Checkpoint open_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    Checkpoint c{TensorSet(path), "", "", ""};
    c.tensors = read_tensor_file(MappedFile::open(path), &c.container);
    return c;
  }
  Checkpoint c{TensorSet(path), "hf-folder", (fs::path(path) / "config.json").string(), ""};
  if (!fs::exists(c.config_path, ec)) {
    throw FileError(path,
                    "is a folder without config.json; expected a HuggingFace/fla model "
                    "folder (config.json + model.safetensors) or a checkpoint file");
  }
  c.config_text = read_text_file(c.config_path);
  const fs::path file = fs::path(path) / "model.safetensors";
  if (fs::exists(file, ec)) {
    c.tensors = read_tensor_file(MappedFile::open(file.string()));
    return c;
  }
  const fs::path index = fs::path(path) / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    throw FileError(path,
                    "has config.json but neither model.safetensors nor "
                    "model.safetensors.index.json (sharded weights)");
  }
  c.tensors = read_shards(index.string());
  c.container = "hf-folder (sharded)";
  return c;
}

}  // namespace wick::io
