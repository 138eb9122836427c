#include "io/zip_reader.h"

#include <cstdio>
#include <cstring>

#include "wick/errors.h"

namespace wick::io {
namespace {

// Signatures (APPNOTE 4.3.7, 4.3.12, 4.3.14, 4.3.15, 4.3.16).
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kEocdSig = 0x06054b50;

constexpr uint64_t kEocdSize = 22;
constexpr uint64_t kMaxComment = 0xFFFF;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kZip64EocdSize = 56;  // fixed part, before the extensible data sector
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t k32 = 0xFFFFFFFFu;
constexpr uint16_t k16 = 0xFFFF;

uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t rd64(const uint8_t* p) {
  return static_cast<uint64_t>(rd32(p)) | (static_cast<uint64_t>(rd32(p + 4)) << 32);
}

// True if [off, off + len) lies inside [0, limit), without overflowing.
bool fits(uint64_t off, uint64_t len, uint64_t limit) {
  return off <= limit && len <= limit - off;
}

std::string num(uint64_t v) {
  return std::to_string(v);
}
std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}
std::string span(uint64_t off, uint64_t len) {
  uint64_t end;
  if (__builtin_add_overflow(off, len, &end))
    return "[" + num(off) + ", " + num(off) + " + " + num(len) + ")";
  return "[" + num(off) + ", " + num(end) + ")";
}

// An entry name fit for a message: control and non-ASCII bytes escaped, long names cut.
std::string printable(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

std::string entry_label(std::string_view name) {
  return "zip entry '" + printable(name) + "'";
}

// Resolves the ZIP64 extended information extra field (APPNOTE 4.5.3) in `extra`: each value
// that its header holds as the 0xFFFFFFFF (0xFFFF for the disk) sentinel is read from the field,
// in the order uncompressed size, compressed size, local header offset, disk number. In a local
// header the field carries both sizes whenever either is a sentinel.
void apply_zip64_extra(const std::string& path, const std::string& label, const uint8_t* extra,
                       uint64_t len, bool local, uint64_t* usize, uint64_t* csize, uint64_t* lho,
                       uint32_t* disk) {
  const bool need_u = *usize == k32, need_c = *csize == k32;
  const bool need_o = lho && *lho == k32, need_d = disk && *disk == k16;
  const bool need_any = need_u || need_c || need_o || need_d;
  bool found = false;
  uint64_t off = 0;
  while (len - off >= 4) {
    const uint16_t id = rd16(extra + off);
    const uint16_t dlen = rd16(extra + off + 2);
    if (!fits(off + 4, dlen, len)) {
      throw FormatError(
          path, "",
          "the extra fields of " + label + " to fit in its " + num(len) + "-byte extra area",
          "field " + hex(id, 4) + " of " + num(dlen) + " bytes at offset " + num(off) +
              " (corrupt header)");
    }
    const uint8_t* d = extra + off + 4;
    if (id == kZip64ExtraId && need_any && !found) {
      found = true;
      uint64_t cur = 0;
      auto take = [&](uint64_t* v, uint64_t width, const char* what) {
        if (!fits(cur, width, dlen)) {
          throw FormatError(path, "",
                            "the ZIP64 extra field of " + label + " to hold the " + what +
                                " its header marks as 0xFFFFFFFF",
                            "a field of only " + num(dlen) + " bytes");
        }
        *v = width == 8 ? rd64(d + cur) : rd32(d + cur);
        cur += width;
      };
      if (local && (need_u || need_c) && dlen >= 16) {
        take(usize, 8, "uncompressed size");
        take(csize, 8, "compressed size");
      } else {
        if (need_u) take(usize, 8, "uncompressed size");
        if (need_c) take(csize, 8, "compressed size");
      }
      if (need_o) take(lho, 8, "local header offset");
      if (need_d) {
        uint64_t d64 = 0;
        take(&d64, 4, "disk number");
        *disk = static_cast<uint32_t>(d64);
      }
    }
    off += 4 + static_cast<uint64_t>(dlen);
  }
  if (need_any && !found) {
    throw FormatError(path, "",
                      "a ZIP64 extra field in " + label +
                          " (its header holds 0xFFFFFFFF placeholders for sizes or offsets)",
                      "none (corrupt or truncated archive)");
  }
}

}  // namespace

std::string zip_method_name(uint16_t method) {
  switch (method) {
    case 0:
      return "stored";
    case 8:
      return "deflate";
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstd";
    case 95:
      return "xz";
    default:
      return "method " + num(method);
  }
}

ZipReader::ZipReader(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {
  const std::string& p = file_->path();
  const uint8_t* b = file_->data();
  const uint64_t size = file_->size();

  // --- End of central directory record: the last 22 + comment bytes.
  if (size < kEocdSize) {
    throw FormatError(p, "", "a ZIP archive of at least 22 bytes (end of central directory)",
                      num(size) + " bytes (truncated file?)");
  }
  uint64_t eocd = UINT64_MAX;
  const uint64_t lowest = size > kEocdSize + kMaxComment ? size - kEocdSize - kMaxComment : 0;
  for (uint64_t pos = size - kEocdSize;; --pos) {
    if (rd32(b + pos) == kEocdSig && pos + kEocdSize + rd16(b + pos + 20) == size) {
      eocd = pos;
      break;
    }
    if (pos == lowest) break;
  }
  if (eocd == UINT64_MAX) {
    throw FormatError(p, "",
                      "a ZIP end-of-central-directory record (PK\\5\\6) in the last " +
                          num(kEocdSize + kMaxComment) + " bytes",
                      "none (truncated file, or not a zip archive)");
  }
  uint32_t disk = rd16(b + eocd + 4);
  uint32_t cd_disk = rd16(b + eocd + 6);
  uint64_t n_disk = rd16(b + eocd + 8);
  uint64_t n_total = rd16(b + eocd + 10);
  uint64_t cd_size = rd32(b + eocd + 12);
  uint64_t cd_off = rd32(b + eocd + 16);
  uint64_t records_start = eocd;  // the central directory must end before this

  // --- ZIP64 locator right before the EOCD, pointing at the ZIP64 EOCD record.
  const bool has_locator =
      eocd >= kZip64LocatorSize && rd32(b + eocd - kZip64LocatorSize) == kZip64LocatorSig;
  if (has_locator) {
    const uint8_t* loc = b + eocd - kZip64LocatorSize;
    const uint32_t z_disk = rd32(loc + 4);
    const uint64_t z_off = rd64(loc + 8);
    const uint32_t disks = rd32(loc + 16);
    if (z_disk != 0 || disks > 1) {
      throw FormatError(p, "", "a single-disk archive (ZIP64 locator: disk 0 of 1)",
                        "disk " + num(z_disk) + " of " + num(disks) +
                            " (split/spanned archives are not supported)");
    }
    const uint64_t loc_pos = eocd - kZip64LocatorSize;
    if (!fits(z_off, kZip64EocdSize, loc_pos) || rd32(b + z_off) != kZip64EocdSig) {
      throw FormatError(p, "",
                        "a ZIP64 end-of-central-directory record (PK\\6\\6) at the offset its "
                        "locator gives, before byte " +
                            num(loc_pos),
                        fits(z_off, kZip64EocdSize, loc_pos)
                            ? "other bytes at offset " + num(z_off)
                            : "offset " + num(z_off) + " (outside the file)");
    }
    const uint8_t* z = b + z_off;
    const uint64_t rec_size = rd64(z + 4);  // size of the remaining record, excluding 12 bytes
    if (rec_size < kZip64EocdSize - 12 || !fits(z_off, 12 + rec_size, loc_pos)) {
      throw FormatError(p, "",
                        "a ZIP64 end-of-central-directory record of at least 44 bytes ending "
                        "before its locator at byte " +
                            num(loc_pos),
                        "a record size of " + num(rec_size));
    }
    disk = rd32(z + 16);
    cd_disk = rd32(z + 20);
    n_disk = rd64(z + 24);
    n_total = rd64(z + 32);
    cd_size = rd64(z + 40);
    cd_off = rd64(z + 48);
    records_start = z_off;
  } else if (n_disk == k16 || n_total == k16 || cd_size == k32 || cd_off == k32) {
    throw FormatError(p, "",
                      "a ZIP64 end-of-central-directory locator (the end record holds 0xFFFF... "
                      "placeholders)",
                      "none (corrupt or truncated archive)");
  }
  if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
    throw FormatError(p, "", "a single-disk archive",
                      "disk " + num(disk) + ", central directory on disk " + num(cd_disk) + ", " +
                          num(n_disk) + " of " + num(n_total) +
                          " entries on this disk (split/spanned archives are not supported)");
  }
  if (!fits(cd_off, cd_size, records_start)) {
    throw FormatError(p, "",
                      "the central directory inside the file, before its end records at byte " +
                          num(records_start),
                      "the span " + span(cd_off, cd_size) + " (file of " + num(size) +
                          " bytes; truncated or corrupt archive)");
  }
  if (n_total > cd_size / kCentralHeaderSize) {
    throw FormatError(p, "",
                      "at most " + num(cd_size / kCentralHeaderSize) + " entries in a " +
                          num(cd_size) + "-byte central directory (46 bytes each at least)",
                      num(n_total) + " entries");
  }

  // --- Central directory entries, each checked against its local header.
  const uint64_t cd_end = cd_off + cd_size;
  entries_.reserve(static_cast<size_t>(n_total));
  uint64_t pos = cd_off;
  for (uint64_t i = 0; i < n_total; ++i) {
    if (!fits(pos, kCentralHeaderSize, cd_end) || rd32(b + pos) != kCentralHeaderSig) {
      throw FormatError(p, "",
                        "central directory entry " + num(i) + " of " + num(n_total) +
                            " (PK\\1\\2) at byte " + num(pos),
                        fits(pos, kCentralHeaderSize, cd_end)
                            ? std::string("other bytes (corrupt central directory)")
                            : "the end of the " + num(cd_size) + "-byte central directory");
    }
    const uint8_t* h = b + pos;
    ZipEntry e;
    e.flags = rd16(h + 8);
    e.method = rd16(h + 10);
    e.crc32 = rd32(h + 16);
    e.compressed_size = rd32(h + 20);
    e.uncompressed_size = rd32(h + 24);
    const uint64_t name_len = rd16(h + 28), extra_len = rd16(h + 30), comment_len = rd16(h + 32);
    uint32_t start_disk = rd16(h + 34);
    e.local_header_offset = rd32(h + 42);
    const uint64_t var_len = name_len + extra_len + comment_len;
    if (!fits(pos + kCentralHeaderSize, var_len, cd_end)) {
      throw FormatError(p, "",
                        "central directory entry " + num(i) +
                            " (name, extra field and comment) inside the central directory",
                        "it runs past byte " + num(cd_end) + " (corrupt central directory)");
    }
    e.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    const std::string label = entry_label(e.name);
    apply_zip64_extra(p, label, h + kCentralHeaderSize + name_len, extra_len, /*local=*/false,
                      &e.uncompressed_size, &e.compressed_size, &e.local_header_offset,
                      &start_disk);
    if (start_disk != 0) {
      throw FormatError(p, "", label + " on disk 0", "disk " + num(start_disk));
    }
    pos += kCentralHeaderSize + var_len;

    // Local file header (4.3.7): the data starts after its own name and extra field, whose
    // lengths may differ from the central ones (PyTorch pads the local extra to align data).
    const uint64_t lho = e.local_header_offset;
    if (!fits(lho, kLocalHeaderSize, cd_off) || rd32(b + lho) != kLocalHeaderSig) {
      throw FormatError(p, "",
                        "the local header (PK\\3\\4) of " + label + " at byte " + num(lho) +
                            ", before the central directory at byte " + num(cd_off),
                        fits(lho, kLocalHeaderSize, cd_off)
                            ? std::string("other bytes (corrupt archive)")
                            : "an offset outside that range (truncated or corrupt archive)");
    }
    const uint8_t* l = b + lho;
    const uint16_t l_flags = rd16(l + 6), l_method = rd16(l + 8);
    uint64_t l_csize = rd32(l + 18), l_usize = rd32(l + 22);
    const uint64_t l_name_len = rd16(l + 26), l_extra_len = rd16(l + 28);
    if (!fits(lho + kLocalHeaderSize, l_name_len + l_extra_len, cd_off)) {
      throw FormatError(p, "",
                        "the local header of " + label + " to end before the central directory",
                        "its name and extra field run past byte " + num(cd_off));
    }
    const std::string_view l_name(reinterpret_cast<const char*>(l + kLocalHeaderSize), l_name_len);
    if (l_name != e.name) {
      throw FormatError(p, "", "the local header of " + label + " to repeat its name",
                        "'" + printable(l_name) + "' (corrupt archive)");
    }
    if (l_method != e.method || (l_flags & 0x41) != (e.flags & 0x41)) {
      throw FormatError(p, "",
                        "the local header of " + label + " to agree with the central directory (" +
                            zip_method_name(e.method) + ", flags " + hex(e.flags, 4) + ")",
                        zip_method_name(l_method) + ", flags " + hex(l_flags, 4));
    }
    // With bit 3 (data descriptor) the local sizes may be zero; the central ones count.
    const bool deferred = (l_flags & 0x0008) != 0 && l_csize == 0 && l_usize == 0;
    if (!deferred) {
      apply_zip64_extra(p, label + " (local header)", l + kLocalHeaderSize + l_name_len,
                        l_extra_len, /*local=*/true, &l_usize, &l_csize, nullptr, nullptr);
      if (l_csize != e.compressed_size || l_usize != e.uncompressed_size) {
        throw FormatError(
            p, "",
            "the local header of " + label +
                " to record the central directory's sizes (compressed " + num(e.compressed_size) +
                ", uncompressed " + num(e.uncompressed_size) + ")",
            "compressed " + num(l_csize) + ", uncompressed " + num(l_usize) + " (corrupt archive)");
      }
    }
    e.data_offset = lho + kLocalHeaderSize + l_name_len + l_extra_len;
    if (!fits(e.data_offset, e.compressed_size, cd_off)) {
      const bool past_end = !fits(e.data_offset, e.compressed_size, size);
      throw FormatError(p, "",
                        "the " + num(e.compressed_size) + " data bytes of " + label +
                            " inside the file, before the central directory at byte " + num(cd_off),
                        "the span " + span(e.data_offset, e.compressed_size) +
                            (past_end ? ", past the end of the " + num(size) +
                                            "-byte file (truncated or corrupt archive)"
                                      : ", running into the central directory (corrupt archive)"));
    }
    e.data = b + e.data_offset;
    if (!index_.emplace(e.name, entries_.size()).second) {
      throw FormatError(p, "", "each zip entry name once", "a second " + label);
    }
    entries_.push_back(std::move(e));
  }
  if (pos != cd_end) {
    throw FormatError(
        p, "",
        "the " + num(n_total) + " entries to fill the " + num(cd_size) + "-byte central directory",
        "they end at byte " + num(pos) + " instead of " + num(cd_end) + " (corrupt archive)");
  }
}

const ZipEntry* ZipReader::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const uint8_t* ZipReader::data(const ZipEntry& e, uint64_t* size) const {
  const std::string label = entry_label(e.name);
  if (e.encrypted()) {
    throw FormatError(path(), "", label + " unencrypted",
                      "an encrypted entry (flags " + hex(e.flags, 4) + "); wick does not decrypt");
  }
  if (e.method != kZipMethodStored) {
    throw FormatError(path(), "",
                      label +
                          " stored uncompressed (method 0, as torch.save writes it; wick maps "
                          "tensors in place and never decompresses)",
                      "compression method " + num(e.method) + " (" + zip_method_name(e.method) +
                          "); re-save the checkpoint with torch.save, or unzip and re-zip it "
                          "with 'zip -0'");
  }
  if (e.compressed_size != e.uncompressed_size) {
    throw FormatError(
        path(), "", label + " (stored) with equal compressed and uncompressed sizes",
        num(e.compressed_size) + " and " + num(e.uncompressed_size) + " (corrupt archive)");
  }
  *size = e.compressed_size;
  return e.data;
}

const uint8_t* ZipReader::data(std::string_view name, uint64_t* size) const {
  const ZipEntry* e = find(name);
  if (!e) {
    throw FormatError(path(), "", "an " + entry_label(name) + " in the archive", "none");
  }
  return data(*e, size);
}

}  // namespace wick::io
