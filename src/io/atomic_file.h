// A file written under a temporary name in the target's folder (mkstemp) and renamed over the
// target by commit(), so readers never see a half-written file and a failure leaves the target
// untouched. Destroyed without commit(), it removes the temporary file. Used by every writer of
// model, state and .rwkvq files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace wick::io {

class AtomicFile {
 public:
  // Creates the temporary file. Throws FileError when it cannot.
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  // Appends n bytes at the current end of the sequential writes. Throws FileError.
  void write(const char* data, size_t n);
  // Writes n bytes at `offset` (positional; does not move the sequential position). Throws
  // FileError.
  void write_at(uint64_t offset, const char* data, size_t n);
  // Sets the file's size (new bytes read as zeros). Throws FileError.
  void resize(uint64_t bytes);
  // Flushes, closes and renames the temporary file over the target (mode 0644). Throws FileError.
  void commit();

  // Bytes appended by write().
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t size_ = 0;
};

}  // namespace wick::io
