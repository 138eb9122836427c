// Test helpers that write PyTorch .pth files byte by byte (tests only; wick reads .pth, it never
// writes one): a minimal zip writer (APPNOTE.TXT) with knobs to break it, a pickle writer with the
// opcodes torch.save uses (protocol 2) plus hostile ones, and write_pth() for a whole state dict
// of real tensors, laid out as torch.save writes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wick/dtype.h"

namespace wick::test::pth {

// ---------------------------------------------------------------------------------------------
// Byte helpers

inline void put16(std::string& s, uint64_t v) {
  for (int i = 0; i < 2; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put32(std::string& s, uint64_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void patch32(std::string& s, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[off + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void patch64(std::string& s, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[off + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

inline uint32_t crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// ---------------------------------------------------------------------------------------------
// A minimal zip writer (APPNOTE.TXT), with knobs to break it.

struct ZipItem {
  std::string name;
  std::string data;
  uint16_t method = 0;
  uint16_t flags = 0;
  std::optional<uint64_t> size;        // size recorded in both headers (default: data.size())
  std::optional<uint32_t> local_size;  // size recorded in the local header only
};

inline std::string make_zip(const std::vector<ZipItem>& items, bool zip64 = false) {
  std::string out, cd;
  for (const ZipItem& it : items) {
    const uint64_t lho = out.size();
    const uint64_t size = it.size.value_or(it.data.size());
    const uint32_t crc = crc32(it.data);
    // Local header.
    put32(out, 0x04034b50);
    put16(out, zip64 ? 45 : 20);
    put16(out, it.flags);
    put16(out, it.method);
    put16(out, 0);
    put16(out, 0);
    put32(out, crc);
    const uint64_t lsize = it.local_size ? *it.local_size : size;
    put32(out, zip64 ? 0xFFFFFFFFu : lsize);
    put32(out, zip64 ? 0xFFFFFFFFu : lsize);
    put16(out, it.name.size());
    put16(out, zip64 ? 20 : 0);
    out += it.name;
    if (zip64) {
      put16(out, 1);
      put16(out, 16);
      put64(out, lsize);
      put64(out, lsize);
    }
    out += it.data;
    // Central directory header.
    put32(cd, 0x02014b50);
    put16(cd, zip64 ? 45 : 20);
    put16(cd, zip64 ? 45 : 20);
    put16(cd, it.flags);
    put16(cd, it.method);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, crc);
    put32(cd, zip64 ? 0xFFFFFFFFu : size);
    put32(cd, zip64 ? 0xFFFFFFFFu : size);
    put16(cd, it.name.size());
    put16(cd, zip64 ? 28 : 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0);
    put32(cd, zip64 ? 0xFFFFFFFFu : lho);
    cd += it.name;
    if (zip64) {
      put16(cd, 1);
      put16(cd, 24);
      put64(cd, size);
      put64(cd, size);
      put64(cd, lho);
    }
  }
  const uint64_t cd_off = out.size();
  out += cd;
  if (zip64) {
    const uint64_t z = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, items.size());
    put64(out, items.size());
    put64(out, cd.size());
    put64(out, cd_off);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, z);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, zip64 ? 0xFFFF : items.size());
  put16(out, zip64 ? 0xFFFF : items.size());
  put32(out, zip64 ? 0xFFFFFFFFu : cd.size());
  put32(out, zip64 ? 0xFFFFFFFFu : cd_off);
  put16(out, 0);
  return out;
}

// ---------------------------------------------------------------------------------------------
// A minimal pickle writer: the opcodes torch.save uses (protocol 2), plus hostile ones.

struct Pk {
  std::string b;
  Pk& op(uint8_t c) {
    b.push_back(static_cast<char>(c));
    return *this;
  }
  Pk& raw(const std::string& s) {
    b += s;
    return *this;
  }
  Pk& proto(int v) { return op(0x80).op(static_cast<uint8_t>(v)); }
  Pk& mark() { return op('('); }
  Pk& str(const std::string& s) {
    op('X');
    put32(b, s.size());
    return raw(s);
  }
  Pk& integer(int64_t v) {
    if (v >= 0 && v < 256) return op('K').op(static_cast<uint8_t>(v));
    if (v >= 0 && v < 65536) {
      op('M');
      put16(b, static_cast<uint64_t>(v));
      return *this;
    }
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      put32(b, static_cast<uint32_t>(static_cast<int32_t>(v)));
      return *this;
    }
    op(0x8a).op(8);
    put64(b, static_cast<uint64_t>(v));
    return *this;
  }
  Pk& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  Pk& ints(const std::vector<int64_t>& v) {
    mark();
    for (int64_t x : v) integer(x);
    return op('t');
  }
};

struct TensorSpec {
  std::string name;
  std::string storage_type = "FloatStorage";
  std::string key = "0";
  int64_t storage_numel = 0;
  int64_t offset = 0;
  std::vector<int64_t> shape;
  std::optional<std::vector<int64_t>> stride;  // default: row-major contiguous
};

inline std::vector<int64_t> contiguous(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

// Emits _rebuild_tensor_v2(persistent storage id, offset, size, stride, False, OrderedDict()).
inline void put_tensor(Pk& p, const TensorSpec& t) {
  p.global("torch._utils", "_rebuild_tensor_v2").mark();
  p.mark().str("storage").global("torch", t.storage_type).str(t.key).str("cpu");
  p.integer(t.storage_numel).op('t').op('Q');
  p.integer(t.offset).ints(t.shape).ints(t.stride.value_or(contiguous(t.shape)));
  p.op(0x89).global("collections", "OrderedDict").op(')').op('R');
  p.op('t').op('R');
}

inline std::string state_dict(const std::vector<TensorSpec>& tensors) {
  Pk p;
  p.proto(2).op('}').op('q').op(0).mark();
  for (const TensorSpec& t : tensors) {
    p.str(t.name);
    put_tensor(p, t);
  }
  return p.op('u').op('.').b;
}

inline std::string pattern_bytes(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) & 0xFF);
  return s;
}

// An archive laid out as torch.save writes it.
inline std::vector<ZipItem> pth_items(const std::string& pickle,
                               const std::vector<std::pair<std::string, std::string>>& storages,
                               const std::string& prefix = "archive") {
  std::vector<ZipItem> items;
  items.push_back({prefix + "/data.pkl", pickle});
  items.push_back({prefix + "/byteorder", "little"});
  for (const auto& [key, bytes] : storages) items.push_back({prefix + "/data/" + key, bytes});
  items.push_back({prefix + "/version", "3\n"});
  return items;
}


// One tensor of a state dict: its key, dtype (F32, F16 or BF16), shape and little-endian bytes.
struct PthTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Writes `tensors` as torch.save does (an OrderedDict of tensors, one storage each). Returns
// false when the file cannot be written.
bool write_pth(const std::filesystem::path& path, const std::vector<PthTensor>& tensors);

}  // namespace wick::test::pth
