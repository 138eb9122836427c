// Read-only bytes of a file: memory-mapped from disk, or borrowed from memory that outlives the
// object (the model embedded in the binary). Tensor views point into these bytes, so a
// MappedFile is shared (std::shared_ptr) by everything that reads from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace wick::io {

class MappedFile {
 public:
  // Maps `path` read-only. Throws FileError if it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  // Wraps bytes owned elsewhere (they must outlive every user). `name` is used in messages.
  static std::shared_ptr<MappedFile> borrow(const uint8_t* data, size_t size, std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
  std::string path_;
};

}  // namespace wick::io
