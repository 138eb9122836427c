// A restricted, non-executing unpickler for the part of the pickle format (protocols 2 to 5,
// Lib/pickletools.py and PEP 307/3154 describe the opcodes) that `torch.save` writes for a
// tensor state dict (PyTorch: torch/serialization.py `_save`, torch/_utils.py).
//
// Nothing from the file is ever executed or imported. GLOBAL/STACK_GLOBAL only accept a short
// whitelist (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and
// the torch *Storage types); anything else raises wick::UnsafePickleError naming it. REDUCE
// does not call anything: it records a Call value {callable, args} that the .pth reader
// interprets, except `OrderedDict()` which becomes a plain dict. BINPERSID records a
// PersistentId value around the persistent id (the storage tuple). Opcodes outside the subset,
// including every object-building one (INST, OBJ, NEWOBJ, EXT*) raise UnsafePickleError with
// their name and offset. Every length is checked against the remaining bytes.
//
// Memory and work are O(pickle bytes): the value, stack, memo and container-slot counts are each
// capped in proportion to the pickle's size (and by an absolute ceiling), no opcode copies a
// container (REDUCE/BINPERSID refer to their argument; the one copy, OrderedDict(pairs), is
// charged to the slot budget), None/True/False are shared, and strings are views into one copy
// of the pickle bytes. Hitting a cap raises FormatError naming the file, the cap and the byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick::io {

struct PickleValue {
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,        // str (unicode); `str`
    kBytes,         // bytes or a protocol-2 BINSTRING; `str`
    kTuple,         // `items`
    kList,          // `items`
    kDict,          // dict or OrderedDict; `entries` in insertion order
    kGlobal,        // a whitelisted global: `module`, `name`
    kPersistentId,  // BINPERSID: `args` is the persistent id
    kCall,          // REDUCE of a whitelisted callable: `callable` applied to the tuple `args`
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  union {
    int64_t integer = 0;
    double real;
  };
  // kString/kBytes: the bytes; kGlobal: module and name. Views into the owning Unpickled.
  std::string_view str, module, name;
  std::vector<PickleValue*> items;
  std::vector<std::pair<PickleValue*, PickleValue*>> entries;
  // kCall: the global and its argument tuple (shared with the pickle, never copied);
  // kPersistentId: `args` is the persistent id.
  const PickleValue* callable = nullptr;
  const PickleValue* args = nullptr;
  size_t offset = 0;  // byte offset of the opcode that produced it

  bool is(Kind k) const { return kind == k; }
  bool is_global(std::string_view mod, std::string_view nm) const {
    return kind == Kind::kGlobal && module == mod && name == nm;
  }
};

// Short description of a value for messages ("str 'abc'", "int 5", "tuple of 3", ...).
std::string describe(const PickleValue& v);

// The result of unpickling: owns every value and the copy of the pickle bytes the strings point
// into; `root` is the object STOP returned. Movable; values keep their addresses.
class Unpickled {
 public:
  const PickleValue* root() const { return root_; }
  // Values built (None, True and False are shared and not counted).
  size_t value_count() const { return count_; }

 private:
  friend class Unpickler;
  static constexpr size_t kChunk = 256;  // values per arena chunk
  std::vector<uint8_t> bytes_;           // the pickle; every string_view points into it
  std::vector<std::unique_ptr<PickleValue[]>> chunks_;  // the values; addresses never change
  size_t count_ = 0;
  std::unique_ptr<PickleValue[]> constants_;  // None, False, True
  PickleValue* root_ = nullptr;
};

// Limits on what a pickle may build. torch.save writes ~16 values and ~100 bytes per tensor
// (the 399-tensor tiny fixture: 41 KB, 6.5K values; a 2.9B model's ~400 tensors: ~40 KB). Each
// count is capped at the smaller of an absolute ceiling and a share of the pickle's size: values
// and memo indices at size/2 + kPickleLimitSlack, stack depth and open MARKs at
// size + kPickleLimitSlack, container slots (tuple/list items, dict keys and values) at
// 2 * size + kPickleLimitSlack. Every opcode takes at least one byte, so a legitimate pickle stays
// far inside (3x for values, 30x+ for the ceilings); a hostile one allocates at most ~120 bytes
// per pickle byte and ~130 MB in all (values take ~136 bytes each), plus the copy of the pickle.
inline constexpr size_t kPickleLimitSlack = 4096;
inline constexpr size_t kMaxPickleValues = size_t{1} << 19;
inline constexpr size_t kMaxPickleStack = size_t{1} << 20;
inline constexpr size_t kMaxPickleMemo = size_t{1} << 19;
inline constexpr size_t kMaxPickleSlots = size_t{1} << 21;

// Unpickles `size` bytes at `data`. `path` and `what` (e.g. "zip entry 'archive/data.pkl'")
// name the source in messages. Throws UnsafePickleError for a global or opcode outside the
// subset, FormatError for malformed input (truncation, stack underflow, bad lengths, a limit
// above exceeded, ...). The bytes are copied; `data` need not outlive the result.
Unpickled unpickle(const uint8_t* data, size_t size, const std::string& path,
                   const std::string& what);

}  // namespace wick::io
