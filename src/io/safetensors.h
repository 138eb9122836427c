// safetensors reader (https://github.com/huggingface/safetensors, "Format" section):
// u64 little-endian header length N, N bytes of JSON, then the data section. Validated strictly:
// header inside the file, well-formed JSON object with unique keys, known dtypes, offsets inside
// the data section, no overlapping tensors, prod(shape) x dtype size == byte span.
#pragma once

#include <memory>
#include <string>

#include "io/tensor_set.h"

namespace wick::io {

// Largest JSON header accepted (the reference implementation's limit is 100 MB as well).
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Parses `file` as safetensors. Throws FormatError (naming the file and, where there is one,
// the tensor) on any violation. The views point into `file`, which the set keeps alive.
TensorSet read_safetensors(std::shared_ptr<MappedFile> file);

// True if the first bytes look like safetensors (a plausible u64 length followed by '{').
bool looks_like_safetensors(const MappedFile& file);

}  // namespace wick::io
