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
  // Maps `path` read-only, advised for transparent huge pages (madvise MADV_HUGEPAGE: pages read
  // in through the mapping come in 2 MiB folios where the kernel and file system allow, which
  // cuts the TLB misses of streaming a large model's weights; pages already cached in small
  // folios may stay so, and a kernel that refuses or ignores the advice changes nothing). Throws
  // FileError if the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  // Wraps bytes owned elsewhere (they must outlive every user). `name` is used in messages.
  static std::shared_ptr<MappedFile> borrow(const uint8_t* data, size_t size, std::string name);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Whether [p, p + n) lies inside this object's bytes (mapped or borrowed), compared as addresses
  // (so a pointer into any other object may be asked about). An empty range (n = 0) is held from
  // data() to data() + size(), both ends included. Thread-safe.
  bool holds(const void* p, size_t n) const;

  // Gives the memory of the whole pages inside [p, p + n) back to the system (madvise
  // MADV_DONTNEED) when they belong to this object's own mapping, and returns how many bytes
  // that covered (0 for borrowed bytes, a range outside the mapping, or a failed madvise). The
  // bytes stay readable: the mapping is private and read-only, so a later read maps the same
  // file contents in again (where the range cuts through a huge page, the kernel may unmap the
  // whole 2 MiB of it: the rest reads back the same way). For data no one will read again (a
  // matrix converted to another format at load) it lowers the resident memory. Thread-safe.
  size_t release_pages(const void* p, size_t n) const;

  // Advises the whole pages inside [p, p + n) for sparse reads: no huge pages there
  // (MADV_NOHUGEPAGE) and no read-ahead (MADV_RANDOM). With a cold page cache a read then brings
  // in and maps only the base pages (4 KiB on x86-64) it touches, not a huge-page folio (2 MiB) or
  // a read-ahead window around them. Pages already cached are mapped as the kernel holds them:
  // fault-around may still map cached neighbours (up to fault_around_bytes), and a range cached
  // in large folios (a file just written, or read through a huge-page mapping) maps whole folios.
  // For a table read a row at a time (the embedding: one row per token). Returns the bytes
  // advised: 0 for borrowed bytes, a range outside the mapping, less than a page, or a kernel
  // that refuses MADV_RANDOM. A kernel without transparent huge pages refuses MADV_NOHUGEPAGE
  // (nothing to undo there); that is not a failure. The advice changes no byte read, only page
  // sizes and read-ahead; the range's ends split the mapping, so the huge pages that would have
  // straddled them are mapped in base pages too. Thread-safe.
  size_t advise_sparse(const void* p, size_t n) const;

 private:
  // [lo, hi): the whole pages of this object's own mapping inside [p, p + n); lo == hi when there
  // are none (borrowed bytes, a range outside the mapping, or less than a page).
  struct PageRange {
    uintptr_t lo = 0, hi = 0;
  };
  PageRange own_pages(const void* p, size_t n) const;

  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
  std::string path_;
};

}  // namespace wick::io
