#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "wick/errors.h"

namespace wick::io {
namespace {

std::string shape_string(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Checks one tensor and returns its byte count.
uint64_t checked_nbytes(const TensorToWrite& t) {
  if (t.name.empty()) throw Error("safetensors writer: a tensor has an empty name");
  if (t.name == "__metadata__") {
    throw Error("safetensors writer: '__metadata__' is reserved and cannot name a tensor");
  }
  const uint64_t esize = dtype_size(t.dtype);
  if (esize == 0) {
    throw Error("safetensors writer: tensor '" + t.name + "' has an unknown dtype (" +
                std::to_string(static_cast<int>(t.dtype)) + ")");
  }
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) {
      throw Error("safetensors writer: tensor '" + t.name + "' has a negative dimension in shape " +
                  shape_string(t.shape));
    }
    const uint64_t v = static_cast<uint64_t>(d);
    if (v != 0 && numel > UINT64_MAX / v) {
      throw Error("safetensors writer: tensor '" + t.name + "': the element count of shape " +
                  shape_string(t.shape) + " overflows 64 bits");
    }
    numel *= v;
  }
  if (numel > UINT64_MAX / esize) {
    throw Error("safetensors writer: tensor '" + t.name + "': the byte count of shape " +
                shape_string(t.shape) + " overflows 64 bits");
  }
  const uint64_t expected = numel * esize;
  if (t.bytes.size() != expected) {
    throw Error("safetensors writer: tensor '" + t.name + "': expected " + std::to_string(expected) +
                " bytes (" + std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape) +
                "), found " + std::to_string(t.bytes.size()));
  }
  return expected;
}

}  // namespace

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps insertion order: __metadata__ first, then the tensors as given (which is
  // also the order of their data).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const uint64_t n = checked_nbytes(t);
    if (!names.insert(t.name).second) {
      throw Error("safetensors writer: tensor '" + t.name + "' is given twice; names must be unique");
    }
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = std::string(dtype_name(t.dtype));
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + n};
    header[t.name] = std::move(e);
    offset += n;
  }

  std::string json = header.dump();
  // Pad with spaces (valid JSON whitespace) so that 8 + N is a multiple of 8.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += json;
  for (const TensorToWrite& t : tensors)
    if (!t.bytes.empty()) out.append(t.bytes.data(), t.bytes.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string bytes = serialize_safetensors(tensors, metadata);

  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw FileError(path, std::string("cannot create a temporary file in ") + dir.string() + ": " +
                              std::strerror(errno));
  }
  const std::string tmp(name.data());
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw FileError(path, what + ": " + std::strerror(e));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + tmp);
    }
    done += static_cast<size_t>(w);
  }
  // mkstemp creates the file 0600; give it the usual permissions of a new file (best effort).
  (void)::fchmod(fd, 0644);
  if (::fsync(fd) != 0) fail("cannot flush " + tmp);
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw FileError(path, "cannot close " + tmp + ": " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw FileError(path, "cannot rename " + tmp + " to it: " + std::strerror(e));
  }
}

}  // namespace wick::io
