// The `.rwkvq` container of rwkv-quant (docs/rwkvq-format.md §1, §2; reference:
// rwkv_quant/formats/codec.py at 25d8729): a safetensors file whose `__metadata__["rwkvq"]` holds a
// JSON manifest, and per tensor key a record (layout, logical shape, bits, group, block geometry)
// plus its buffers "<key>::<field>".
//
// The reader validates everything before anything is used: manifest format and version (0, 1 or
// 2; higher refused), every record's fields, the presence and dtype and exact shape of every
// buffer a layout needs (derived from the logical shape, the block width and the bits), no buffer
// listed in `fields` missing and no buffer in the file that no record claims. Buffers stay in the
// mapped file; a RwkvqFile only holds views into it (and keeps the mapping alive).
//
// Thread-safety: immutable after open(); share freely.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"
#include "io/tensor_set.h"

namespace wick::quant {

// Tensor layouts of §1.4.
enum class Layout { kDense, kSb6, kSym, kAsym, kRtn };
std::string_view layout_name(Layout l);  // "dense", "sb6", "sym", "asym", "rtn"

// One tensor of the file: its manifest record and views of its buffers (null when absent).
// Buffer pointers may be unaligned: read multi-byte values with memcpy.
struct QuantTensor {
  std::string key;  // name in the source state dict (manifest key)
  Layout layout = Layout::kDense;
  std::vector<int64_t> shape;  // logical shape as stored in the source state dict
  int bits = 16;               // effective bits: from the buffers for sb6 (4/5/6) and sym (6/8)
  std::string group;           // proj, cmix, emb, head, w_lora, ..., other
  int gs = 0;                  // block width (sb6 32, sym 16, asym 64; 0 otherwise)
  int sb = 0;                  // blocks per superblock (sb6 8, sym 16; 0 otherwise)
  int64_t n_blocks = 0;        // blocks per row covered by the scale buffers
  bool transposed = false;     // stored [in, out] (world LoRA w1/w2/a1/...); from the record
                               // or, for version 1, derived as the spec says
  // Buffers (§1.4 table), null when the layout does not use them.
  const io::TensorView* codes = nullptr;
  const io::TensorView* codes_packed = nullptr;
  const io::TensorView* scale = nullptr;
  const io::TensorView* dense = nullptr;
  const io::TensorView* outlier_indices = nullptr;
  const io::TensorView* outlier_values = nullptr;
  const io::TensorView* gw_d = nullptr;
  const io::TensorView* gw_dm = nullptr;
  const io::TensorView* gw_qsqm = nullptr;
  const io::TensorView* gw_qh = nullptr;
  const io::TensorView* gw_qh2 = nullptr;
  const io::TensorView* gw_scale = nullptr;
  const io::TensorView* gw_min = nullptr;
  const io::TensorView* gw_qs = nullptr;

  int64_t numel() const;
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }        // first axis
  int64_t cols() const { return rows() == 0 ? 0 : numel() / rows(); }  // product of the rest
  uint64_t stored_bytes() const;                                       // sum of the buffer sizes
  // The buffers this tensor uses (the non-null ones above), valid while its file is open.
  std::vector<const io::TensorView*> buffers() const;
  // "sb6@5", "sym@8", "asym@6", "rtn@8", "dense bf16".
  std::string describe() const;
};

struct Manifest {
  int format_version = 0;
  std::string naming;  // "world" or "custom"
  int64_t n_layer = 0, n_embd = 0, head_size = 0, vocab_size = 0;
  std::string config_repr;  // may be empty
  nlohmann::json config;    // null when absent
  std::optional<std::string> tokenizer;
  std::string text;  // the manifest string exactly as stored
};

class RwkvqFile {
 public:
  // True when the safetensors metadata carries the "rwkvq" key.
  static bool is_rwkvq(const io::TensorSet& set);
  // True when the bytes start with the zip magic (a legacy pickle .rwkvq or any .pth).
  static bool is_zip(const io::MappedFile& file);

  // Opens and validates. Throws FormatError (bad container, manifest or buffers: what was
  // expected, what was found, and the tensor) and CheckpointError (a legacy pickle .rwkvq, an
  // unsupported format_version).
  static RwkvqFile open(std::shared_ptr<io::MappedFile> file);
  // Same over an already parsed safetensors set (must carry the "rwkvq" metadata key).
  static RwkvqFile from_tensor_set(io::TensorSet set);

  const Manifest& manifest() const { return *manifest_; }
  // Tensors in manifest order.
  const std::vector<QuantTensor>& tensors() const { return *tensors_; }
  const QuantTensor* find(const std::string& key) const;
  const io::TensorSet& buffers() const { return *set_; }
  const std::string& path() const { return set_->source(); }
  // Keeps the buffers alive (for objects that hold views into them).
  std::shared_ptr<const void> keep_alive() const { return set_; }

 private:
  std::shared_ptr<io::TensorSet> set_;
  std::shared_ptr<Manifest> manifest_;
  std::shared_ptr<std::vector<QuantTensor>> tensors_;
};

}  // namespace wick::quant
