#include "io/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "base/strings.h"
#include "io/atomic_file.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

// Checks one tensor's name, dtype and shape and returns its byte count.
uint64_t checked_nbytes(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (name.empty()) throw Error("safetensors writer: a tensor has an empty name");
  if (name == "__metadata__") {
    throw Error("safetensors writer: '__metadata__' is reserved and cannot name a tensor");
  }
  const uint64_t esize = dtype_size(dtype);
  if (esize == 0) {
    throw Error("safetensors writer: tensor '" + name + "' has an unknown dtype (" +
                std::to_string(static_cast<int>(dtype)) + ")");
  }
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw Error("safetensors writer: tensor '" + name + "' has a negative dimension in shape " +
                  base::shape_string(shape));
    }
    const uint64_t v = static_cast<uint64_t>(d);
    if (v != 0 && numel > UINT64_MAX / v) {
      throw Error("safetensors writer: tensor '" + name + "': the element count of shape " +
                  base::shape_string(shape) + " overflows 64 bits");
    }
    numel *= v;
  }
  if (numel > UINT64_MAX / esize) {
    throw Error("safetensors writer: tensor '" + name + "': the byte count of shape " +
                base::shape_string(shape) + " overflows 64 bits");
  }
  return numel * esize;
}

}  // namespace

std::string safetensors_header(const std::vector<TensorSpec>& tensors,
                               const std::map<std::string, std::string>& metadata,
                               std::vector<uint64_t>* tensor_bytes) {
  // ordered_json keeps insertion order: __metadata__ first, then the tensors as given (which is
  // also the order of their data).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  if (tensor_bytes) tensor_bytes->clear();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const uint64_t n = checked_nbytes(t.name, t.dtype, t.shape);
    if (!names.insert(t.name).second) {
      throw Error("safetensors writer: tensor '" + t.name +
                  "' is given twice; names must be unique");
    }
    if (offset > UINT64_MAX - n) {
      throw Error("safetensors writer: the data section overflows 64 bits at tensor '" + t.name +
                  "'");
    }
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = std::string(dtype_name(t.dtype));
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + n};
    header[t.name] = std::move(e);
    offset += n;
    if (tensor_bytes) tensor_bytes->push_back(n);
  }

  std::string json = header.dump();
  // Pad with spaces (valid JSON whitespace) so that 8 + N is a multiple of 8.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size());
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += json;
  return out;
}

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorToWrite& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  std::vector<uint64_t> sizes;
  std::string out = safetensors_header(specs, metadata, &sizes);
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    if (t.bytes.size() != sizes[i]) {
      throw Error("safetensors writer: tensor '" + t.name + "': expected " +
                  std::to_string(sizes[i]) + " bytes (" + std::string(dtype_name(t.dtype)) + " " +
                  base::shape_string(t.shape) + "), found " + std::to_string(t.bytes.size()));
    }
    total += sizes[i];
  }
  out.reserve(out.size() + total);
  for (const TensorToWrite& t : tensors)
    if (!t.bytes.empty()) out.append(t.bytes.data(), t.bytes.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string bytes = serialize_safetensors(tensors, metadata);
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

uint64_t write_safetensors_streaming(const std::string& path,
                                     const std::vector<TensorSpec>& tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const TensorChunkFiller& fill, size_t chunk_bytes) {
  std::vector<uint64_t> sizes;
  const std::string header = safetensors_header(tensors, metadata, &sizes);
  AtomicFile file(path);
  file.write(header.data(), header.size());
  std::vector<char> buf;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t esize = dtype_size(tensors[i].dtype);
    // Whole elements per chunk, at least one.
    const uint64_t step = std::max<uint64_t>(esize, chunk_bytes / esize * esize);
    for (uint64_t off = 0; off < sizes[i]; off += step) {
      const size_t n = static_cast<size_t>(std::min(step, sizes[i] - off));
      if (buf.size() < n) buf.resize(n);
      fill(i, off, std::span<char>(buf.data(), n));
      file.write(buf.data(), n);
    }
  }
  file.commit();
  return file.size();
}

}  // namespace wick::io
