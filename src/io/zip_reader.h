// Read-only ZIP directory reader over the bytes of a MappedFile, as used by PyTorch's zip
// checkpoints (`torch.save`, format described in torch/serialization.py and
// caffe2/serialize/inline_container.h). Layout per PKWARE's APPNOTE.TXT (6.3.x):
//
//   [local file header 4.3.7][name][extra][data] ... [central directory 4.3.12]
//   [ZIP64 end of central directory record 4.3.14] [ZIP64 locator 4.3.15]
//   [end of central directory record 4.3.16]
//
// Only what a checkpoint needs is supported: one disk, entries "stored" (method 0) without
// encryption. Sizes and offsets above 4 GiB come from the ZIP64 record and the ZIP64
// extended-information extra fields (4.5.3). Every offset and length read from the file is
// checked against the file (overflow-safe) before it is used or anything is allocated from it;
// violations throw wick::FormatError naming the file, the entry, what was expected and found.
// The entry data is never copied: data() returns a pointer into the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"

namespace wick::io {

// Compression methods (APPNOTE 4.4.5) named in messages.
inline constexpr uint16_t kZipMethodStored = 0;
inline constexpr uint16_t kZipMethodDeflate = 8;

struct ZipEntry {
  std::string name;
  uint16_t method = 0;             // compression method (0 = stored)
  uint16_t flags = 0;              // general purpose bit flags (bit 0 = encrypted)
  uint32_t crc32 = 0;              // as recorded in the central directory (not verified)
  uint64_t compressed_size = 0;    // bytes of the entry in the file
  uint64_t uncompressed_size = 0;  // bytes after decompression
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;       // first data byte, resolved from the local file header
  const uint8_t* data = nullptr;  // == file bytes + data_offset; compressed_size bytes follow

  bool encrypted() const { return (flags & 0x0001) != 0 || (flags & 0x0040) != 0; }
};

class ZipReader {
 public:
  // Parses the end-of-central-directory records, the central directory and every entry's local
  // header. Throws FormatError if the file is not a well-formed single-disk ZIP archive, if an
  // entry's header or data lies outside the file, or if local and central headers disagree.
  explicit ZipReader(std::shared_ptr<MappedFile> file);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The entry called exactly `name`, or nullptr.
  const ZipEntry* find(std::string_view name) const;

  // The bytes of a stored entry (pointer into the file, `size` set to its length). Throws
  // FormatError if the entry is compressed or encrypted: nothing is ever inflated or decrypted.
  const uint8_t* data(const ZipEntry& entry, uint64_t* size) const;
  // Same, by name; throws FormatError naming the entry if the archive has none of that name.
  const uint8_t* data(std::string_view name, uint64_t* size) const;

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

// A human name for a compression method ("stored", "deflate", ...) for messages.
std::string zip_method_name(uint16_t method);

}  // namespace wick::io
