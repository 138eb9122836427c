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
// their name and offset. Stack, memo and total object counts are bounded; every length is
// checked against the remaining bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wick::io {

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,        // str (unicode) or a protocol-2 BINSTRING; `str`
    kBytes,         // bytes; `str`
    kTuple,         // `items`
    kList,          // `items`
    kDict,          // dict or OrderedDict; `entries` in insertion order
    kGlobal,        // a whitelisted global: `module`, `name`
    kPersistentId,  // BINPERSID: items[0] is the persistent id
    kCall,          // REDUCE of a whitelisted callable: `callable` applied to `items` (the args)
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string str;
  std::string module, name;  // kGlobal
  std::vector<PickleValue*> items;
  std::vector<std::pair<PickleValue*, PickleValue*>> entries;
  PickleValue* callable = nullptr;  // kCall
  size_t offset = 0;                // byte offset of the opcode that produced it

  bool is(Kind k) const { return kind == k; }
  bool is_global(const char* mod, const char* nm) const {
    return kind == Kind::kGlobal && module == mod && name == nm;
  }
};

// Short description of a value for messages ("str 'abc'", "int 5", "tuple of 3", ...).
std::string describe(const PickleValue& v);

// The result of unpickling: owns every value; `root` is the object STOP returned.
class Unpickled {
 public:
  const PickleValue* root() const { return root_; }
  size_t value_count() const { return arena_.size(); }

 private:
  friend class Unpickler;
  std::vector<std::unique_ptr<PickleValue>> arena_;
  PickleValue* root_ = nullptr;
};

// Limits on what a pickle may build (a state dict needs a few dozen values per tensor).
inline constexpr size_t kMaxPickleValues = size_t{1} << 24;
inline constexpr size_t kMaxPickleStack = size_t{1} << 20;
inline constexpr size_t kMaxPickleMemo = size_t{1} << 22;

// Unpickles `size` bytes at `data`. `path` and `what` (e.g. "zip entry 'archive/data.pkl'")
// name the source in messages. Throws UnsafePickleError for a global or opcode outside the
// subset, FormatError for malformed input (truncation, stack underflow, bad lengths, ...).
Unpickled unpickle(const uint8_t* data, size_t size, const std::string& path,
                   const std::string& what);

}  // namespace wick::io
