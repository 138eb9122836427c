// safetensors writer (the layout read_safetensors() checks, io/safetensors.h): u64 little-endian
// header length N, N bytes of JSON (`__metadata__` first when there is any, then the tensors in
// the order given), space-padded so the data section starts 8-byte aligned, then every tensor's
// bytes concatenated in the same order. Used by the tests to craft files, and for state files and
// synthetic checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "wick/dtype.h"

namespace wick::io {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major, outermost first; [] is a scalar (one element)
  std::string_view bytes;      // little-endian elements, prod(shape) * dtype_size(dtype) bytes;
                               // must stay valid during the call
};

// The whole file as bytes. Throws wick::Error when a tensor's byte count does not match
// prod(shape) x dtype size, a dimension is negative, a name is empty, repeated or
// "__metadata__".
std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Writes serialize_safetensors(...) to `path` atomically: into a temporary file in the same
// folder, which is then renamed over `path`. Throws wick::Error on bad input (as above) and
// wick::FileError when the file cannot be written (the temporary file is removed).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace wick::io
