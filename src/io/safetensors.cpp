#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "io/json_limits.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

using nlohmann::json;

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I8", DType::I8},
      {"U8", DType::U8},   {"I16", DType::I16}, {"I32", DType::I32},   {"I64", DType::I64}};
  for (auto& [name, t] : kNames) {
    if (s == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Reads a non-negative integer that fits in 64 bits.
bool as_u64(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

bool looks_like_safetensors(const MappedFile& file) {
  if (file.size() < 9) return false;
  uint64_t n = read_u64_le(file.data());
  return n >= 2 && n <= file.size() - 8 && file.data()[8] == '{';
}

TensorSet read_safetensors(std::shared_ptr<MappedFile> file) {
  const std::string& path = file->path();
  const uint64_t size = file->size();
  if (size < 8) {
    throw FormatError(path, "", "a safetensors file of at least 8 bytes (u64 header length)",
                      std::to_string(size) + " bytes (truncated file?)");
  }
  const uint64_t header_len = read_u64_le(file->data());
  if (header_len > size - 8) {
    throw FormatError(
        path, "",
        "a header length of at most " + std::to_string(size - 8) + " bytes (the rest of the file)",
        std::to_string(header_len) + " (truncated file, or not safetensors)");
  }
  if (header_len > kMaxSafetensorsHeader) {
    throw FormatError(path, "", "a JSON header of at most 100 MiB",
                      std::to_string(header_len) + " bytes");
  }
  const auto* hbeg = reinterpret_cast<const char*>(file->data() + 8);
  std::string_view header(hbeg, header_len);

  // Parse, refusing duplicate top-level keys (nlohmann keeps the last one silently), nesting
  // beyond {name: {field: [dims]}} and arrays longer than any real shape.
  std::set<std::string> seen_keys;
  std::string duplicate;
  JsonLimits limits;
  limits.max_depth = 3;
  limits.max_array = 64;
  json root = parse_json_limited(
      header, path, "safetensors header", limits, [&](int depth, const std::string& key) {
        if (depth == 1 && !seen_keys.insert(key).second && duplicate.empty()) duplicate = key;
      });
  if (!duplicate.empty()) {
    throw FormatError(path, duplicate, "each key once in the header", "a duplicate key");
  }
  if (!root.is_object()) {
    throw FormatError(path, "", "a JSON object as header", std::string(root.type_name()));
  }

  TensorSet set(path);
  set.keep_alive(file);
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  const uint8_t* data = file->data() + data_start;

  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;

  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw FormatError(path, "", "__metadata__ as an object of strings",
                          std::string(entry.type_name()));
      }
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) {
          throw FormatError(path, "", "__metadata__ values to be strings",
                            "key '" + m.key() + "' holding " + m.value().type_name());
        }
        set.metadata()[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) {
      throw FormatError(path, name, "an object {dtype, shape, data_offsets}", entry.type_name());
    }
    for (auto f = entry.begin(); f != entry.end(); ++f) {
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") {
        throw FormatError(path, name, "only the fields dtype, shape, data_offsets",
                          "an unknown field '" + f.key() + "'");
      }
    }
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
      throw FormatError(path, name, "a string field 'dtype'", "none");
    }
    TensorView t;
    t.name = name;
    const std::string dt = entry["dtype"].get<std::string>();
    if (!parse_dtype(dt, &t.dtype)) {
      throw FormatError(path, name, "a dtype among F32, F16, BF16, I8, U8, I16, I32, I64",
                        "'" + dt + "'");
    }
    if (!entry.contains("shape") || !entry["shape"].is_array()) {
      throw FormatError(path, name, "an array field 'shape'", "none");
    }
    // Element count with overflow checks; every dimension must be a non-negative integer.
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : entry["shape"]) {
      uint64_t v;
      if (!as_u64(d, &v) || v > (1ull << 48)) {
        throw FormatError(path, name, "non-negative integer dimensions", brief_json(d));
      }
      if (v != 0 && numel > UINT64_MAX / v) overflow = true;
      numel *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const json* off = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
    uint64_t begin = 0, end = 0;
    if (off == nullptr || !off->is_array() || off->size() != 2 || !as_u64((*off)[0], &begin) ||
        !as_u64((*off)[1], &end)) {
      throw FormatError(path, name, "'data_offsets' as two non-negative integers [begin, end]",
                        off ? brief_json(*off) : "none");
    }
    if (begin > end || end > data_size) {
      throw FormatError(
          path, name,
          "offsets with begin <= end <= " + std::to_string(data_size) + " (the data section)",
          "[" + std::to_string(begin) + ", " + std::to_string(end) + "]");
    }
    const uint64_t esize = dtype_size(t.dtype);
    if (overflow || numel > UINT64_MAX / esize || numel * esize != end - begin) {
      throw FormatError(path, name,
                        "a byte span of prod(shape) x " + std::to_string(esize) + " = " +
                            (overflow ? std::string("(overflow)") : std::to_string(numel * esize)) +
                            " bytes for " + dt + " " + t.shape_string(),
                        std::to_string(end - begin) + " bytes");
    }
    t.data = data + begin;
    t.nbytes = end - begin;
    spans.push_back({begin, end, name});
    set.add(std::move(t));
  }

  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      throw FormatError(path, spans[i].name, "a byte range not shared with any other tensor",
                        "[" + std::to_string(spans[i].begin) + ", " + std::to_string(spans[i].end) +
                            ") overlapping '" + spans[i - 1].name + "' [" +
                            std::to_string(spans[i - 1].begin) + ", " +
                            std::to_string(spans[i - 1].end) + ")");
    }
  }
  return set;
}

}  // namespace wick::io
