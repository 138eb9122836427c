// The one checkpoint opener (docs/naming.md §7): what a path names - a safetensors file, an
// official .pth (a torch.save zip), or a HuggingFace / fla folder (config.json with
// model.safetensors or a sharded model.safetensors.index.json) - opened as the tensors it stores,
// with container formats wick does not read refused by name from their first bytes (GGUF,
// rwkv.cpp ggml, legacy non-zip torch.save). Used by the model loader, the quantiser and the task
// head readers; nothing here knows about model architectures.
//
// Errors: FileError (cannot open, a folder without the files it needs), CheckpointError (a
// foreign or mislabelled container), FormatError (a damaged container or shard index).
// Thread-safety: free functions without shared state.
#pragma once

#include <memory>
#include <string>

#include "io/mapped_file.h"
#include "io/tensor_set.h"

namespace wick::io {

struct Checkpoint {
  TensorSet tensors;
  // "safetensors", "pth", "hf-folder" or "hf-folder (sharded)".
  std::string container;
  // A folder's config.json: its path and text (both empty for a single file).
  std::string config_path, config_text;
};

// Opens `path` (see above). A folder must hold config.json and either model.safetensors or
// model.safetensors.index.json; every shard is read strictly and must agree with the index
// exactly (no tensor missing from its shard, none unlisted).
Checkpoint open_checkpoint(const std::string& path);

// One mapped file: a .pth zip or a safetensors file (sniffed from the bytes, not the name), after
// refuse_foreign_formats. Sets `*container` to "pth" or "safetensors" when not null.
TensorSet read_tensor_file(std::shared_ptr<MappedFile> file, std::string* container = nullptr);

// Throws CheckpointError naming the format when the file is GGUF, rwkv.cpp ggml or a legacy
// (pre-1.6, non-zip) torch.save.
void refuse_foreign_formats(const MappedFile& file);

// The text of a small file (config.json, a shard index). Throws FileError when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace wick::io
