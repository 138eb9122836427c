// safetensors writer (the layout read_safetensors() checks, io/safetensors.h): u64 little-endian
// header length N, N bytes of JSON (`__metadata__` first when there is any, then the tensors in
// the order given), space-padded so the data section starts 8-byte aligned, then every tensor's
// bytes concatenated in the same order. Used by the tests to craft files, and for state files and
// synthetic checkpoints.
//
// Two ways to write: from bytes already in memory (serialize_safetensors / write_safetensors), or
// streamed (write_safetensors_streaming: the caller fills each tensor chunk by chunk, so a file of
// any size is written in bounded memory). Both build the header with safetensors_header(), so
// the same tensors and metadata give the same bytes either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
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

// A tensor of the streaming writer: what the header says about it (no bytes).
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // as in TensorToWrite
};

// Everything before the data section: the 8-byte little-endian header length, then the JSON
// header (space-padded to a multiple of 8 bytes in total). When `tensor_bytes` is given it
// receives each tensor's byte count (prod(shape) x dtype size), in order. Throws wick::Error when
// a dimension is negative, a dtype is unknown, a byte count overflows 64 bits, or a name is empty,
// repeated or "__metadata__".
std::string safetensors_header(const std::vector<TensorSpec>& tensors,
                               const std::map<std::string, std::string>& metadata = {},
                               std::vector<uint64_t>* tensor_bytes = nullptr);

// The whole file as bytes. Throws wick::Error as safetensors_header(), and when a tensor's byte
// count does not match prod(shape) x dtype size.
std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Writes serialize_safetensors(...) to `path` atomically: into a temporary file in the same
// folder, which is then renamed over `path`. Throws wick::Error on bad input (as above) and
// wick::FileError when the file cannot be written (the temporary file is removed).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Fills `out` with the bytes [offset, offset + out.size()) of tensor number `index` (little-endian
// elements). `offset` and out.size() are whole numbers of elements; out.size() > 0.
using TensorChunkFiller = std::function<void(size_t index, uint64_t offset, std::span<char> out)>;

// Streams a safetensors file to `path` atomically (temporary file in the same folder, renamed
// over `path` at the end), holding at most about `chunk_bytes` of tensor data in memory: writes
// safetensors_header(tensors, metadata), then for each tensor in order calls `fill` for
// consecutive chunks of it (at most max(chunk_bytes, one element) bytes each, whole elements,
// front to back; never for an empty tensor) and writes them. The result is byte-identical to
// serialize_safetensors() of the same tensors holding the bytes `fill` produced. `fill` is called
// on the calling thread, one call at a time; it may use threads inside. Returns the file size in
// bytes. Throws wick::Error on bad specs (as safetensors_header()), wick::FileError when the file
// cannot be written, and whatever `fill` throws; on any error the temporary file is removed and
// `path` is left as it was.
uint64_t write_safetensors_streaming(const std::string& path,
                                     const std::vector<TensorSpec>& tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const TensorChunkFiller& fill,
                                     size_t chunk_bytes = size_t{8} << 20);

}  // namespace wick::io
