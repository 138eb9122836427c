// Writer of the `.rwkvq` container (docs/rwkvq-format.md §1): the manifest (§1.2-1.4) formatted
// exactly as Python's json.dumps formats it, and the safetensors file laid out by the spec's
// "recommended byte-for-byte convention" (§1.1): buffers ordered by dtype descending in the Rust
// safetensors enum order (F32 > I32 > BF16 > F16 > I8 > U8) then by name ascending byte-wise, a
// compact header with `__metadata__` first, space padding so that the data section starts
// 8-aligned, no zero-element buffers. With that convention a fixture re-written from its parsed
// buffers and manifest is byte-identical to the original (conformance C0).
//
// Files are written atomically: into a temporary file beside the target, renamed over it only
// when complete. RwkvqContainerWriter lets a caller write buffers in any order (each is placed at
// its final offset), so a quantiser can encode one tensor at a time in bounded memory.
//
// Thread-safety: separate writers are independent; one writer is used from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/atomic_file.h"
#include "io/safetensors_writer.h"
#include "wick/dtype.h"

namespace wick::quant {

// Python `json.dumps(v)` with default arguments: separators ", " and ": ", ensure_ascii (every
// character outside 0x20..0x7e as \uXXXX, lowercase hex, surrogate pairs above U+FFFF), keys in
// the object's order, floats as Python's repr (shortest round trip; exponent form below 1e-4 and
// from 1e16 on, "1e-08", "1.5e+20", "1.0"; NaN/Infinity spelled as Python does). Throws
// wick::Error for a string that is not valid UTF-8.
std::string python_json_dumps(const nlohmann::ordered_json& v);

// Top-level manifest fields (§1.3), written in this order.
struct ManifestHeader {
  int format_version = 2;
  std::string naming = "world";  // "world" or "custom"
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t head_size = 0;
  int64_t vocab_size = 0;
  std::string config_repr;
  nlohmann::ordered_json config;         // the §1.3.2 object, or null
  std::optional<std::string> tokenizer;  // null when absent
};

// One per-tensor record (§1.4), keys written in this order.
struct TensorRecord {
  std::string key;   // the source state-dict key
  std::string kind;  // dense, sb6, sym, asym, rtn
  std::vector<int64_t> shape;
  int bits = 16;
  std::string group;
  int gw_gs = 0;
  int gw_sb = 0;
  int64_t n_blocks = 0;
  bool transposed = false;
  std::vector<std::string> fields;  // buffer names present, in the §1.4 order
};

// The manifest JSON string (§1.2: what goes into __metadata__["rwkvq"]): "format": "rwkvq", then
// the header fields, then "tensors" with the records in the order given. Throws wick::Error on a
// repeated tensor key.
std::string manifest_text(const ManifestHeader& header, const std::vector<TensorRecord>& records);

// A buffer of the container: "<key>::<field>", its dtype and shape.
struct BufferSpec {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
};

// Rank of a dtype in the Rust safetensors enum (BOOL 0, U8 1, I8 2, ..., F32 11, I64 13); the
// container orders buffers by it, highest first.
int safetensors_dtype_rank(DType t);

// The indices of `buffers` in container order (dtype rank descending, then name ascending), with
// zero-element buffers left out (the format never stores them; leave them out of `fields` too).
std::vector<size_t> container_order(const std::vector<BufferSpec>& buffers);

// The whole `.rwkvq` file as bytes (tests, small files). Buffers in any order; they are sorted,
// zero-element ones skipped. Throws wick::Error on a repeated or empty name or a byte count that
// does not match dtype x shape.
std::string serialize_rwkvq(const std::string& manifest,
                            const std::vector<io::TensorToWrite>& buffers);

// serialize_rwkvq(...) written atomically to `path`. Returns the file size. Throws as
// serialize_rwkvq and FileError when the file cannot be written (the target is then untouched).
uint64_t write_rwkvq(const std::string& path, const std::string& manifest,
                     const std::vector<io::TensorToWrite>& buffers);

// Streams a `.rwkvq` file: the constructor lays out the container from the buffer specs and
// writes the header into a temporary file beside `path`; write() puts one buffer's bytes at its
// offset (any order, each named buffer exactly once); commit() checks that every buffer was
// written, flushes, and renames the file over `path`. Destroyed without commit(), it removes the
// temporary file and leaves `path` untouched.
class RwkvqContainerWriter {
 public:
  // `metadata`: further `__metadata__` entries beside "rwkvq" (the source checkpoint's RWKV-X
  // metadata; none for an rwkv-quant compatible x070 file). Throws wick::Error on bad specs (as
  // serialize_rwkvq) or a "rwkvq" key in `metadata`, FileError when the temporary file cannot be
  // created or written.
  RwkvqContainerWriter(std::string path, const std::string& manifest,
                       const std::vector<BufferSpec>& buffers,
                       const std::map<std::string, std::string>& metadata = {});
  RwkvqContainerWriter(const RwkvqContainerWriter&) = delete;
  RwkvqContainerWriter& operator=(const RwkvqContainerWriter&) = delete;

  // Writes buffer `name`: `n` must equal its byte count. A zero-element buffer needs no write
  // (calling write for it with n = 0 is accepted and does nothing). Throws wick::Error for an
  // unknown name, a second write or a wrong size; FileError on an I/O error.
  void write(const std::string& name, const void* data, size_t n);
  // Throws wick::Error naming the first buffer never written; FileError on an I/O error.
  // Returns the file size in bytes.
  uint64_t commit();

 private:
  struct Slot {
    uint64_t offset = 0;  // absolute file offset
    uint64_t bytes = 0;
    bool written = false;
  };
  io::AtomicFile file_;
  uint64_t total_ = 0;
  std::map<std::string, Slot> slots_;
  std::vector<std::string> order_;  // names in data order (for messages)
};

}  // namespace wick::quant
