#include "io/pth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "base/strings.h"
#include "io/pickle.h"
#include "io/zip_reader.h"
#include "wick/errors.h"

namespace wick::io {
namespace {

using Kind = PickleValue::Kind;

constexpr size_t kMaxDims = 64;
constexpr size_t kMaxMetadataText = size_t{1} << 20;
// All metadata values together: shared (memoized) values can be referenced by any number of keys,
// so the text, not the pickle, would otherwise bound the memory.
constexpr size_t kMaxMetadataTotal = size_t{4} << 20;
constexpr int kMaxMetadataDepth = 32;

std::string num(int64_t v) {
  return std::to_string(v);
}

// Storage type name -> dtype; false for storage types wick does not hold (double, bool).
bool storage_dtype(std::string_view name, DType* out) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"FloatStorage", DType::F32}, {"HalfStorage", DType::F16}, {"BFloat16Storage", DType::BF16},
      {"IntStorage", DType::I32},   {"LongStorage", DType::I64}, {"ShortStorage", DType::I16},
      {"CharStorage", DType::I8},   {"ByteStorage", DType::U8}};
  for (auto& [n, t] : kTypes) {
    if (name == n) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool is_tensor_call(const PickleValue* v) {
  return v->is(Kind::kCall) && v->callable->module == "torch._utils";
}

// Renders a non-tensor state-dict value as JSON (None -> null, tuples -> arrays), in at most
// `limit` characters (kMaxMetadataText, or less when the metadata total is nearly spent).
class JsonWriter {
 public:
  JsonWriter(const std::string& path, const std::string& key, size_t limit)
      : path_(path), key_(key), limit_(std::min(limit, kMaxMetadataText)) {}

  std::string write(const PickleValue* v) {
    add(v, 0);
    check_size();
    return out_;
  }

 private:
  [[noreturn]] void refuse(const std::string& found) const {
    throw FormatError(path_, "",
                      "a flat state dict: tensors, or plain values (None, bool, int, float, str, "
                      "and lists/tuples/dicts of them) under key '" +
                          key_ + "'",
                      found);
  }
  void check_size() const {
    if (out_.size() <= limit_) return;
    refuse(limit_ < kMaxMetadataText ? "more than " + std::to_string(kMaxMetadataTotal >> 20) +
                                           " MiB of non-tensor values as text in all"
                                     : std::string("a value of more than 1 MiB as text"));
  }
  void text(std::string_view s) {
    out_ += '"';
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += static_cast<char>(c);
      } else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out_ += buf;
      } else {
        out_ += static_cast<char>(c);
      }
    }
    out_ += '"';
  }
  void add(const PickleValue* v, int depth) {
    if (depth > kMaxMetadataDepth) refuse("values nested more than 32 deep");
    check_size();
    switch (v->kind) {
      case Kind::kNone:
        out_ += "null";
        break;
      case Kind::kBool:
        out_ += v->boolean ? "true" : "false";
        break;
      case Kind::kInt:
        out_ += num(v->integer);
        break;
      case Kind::kFloat: {
        if (!std::isfinite(v->real)) {
          out_ += "null";
        } else {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", v->real);
          out_ += buf;
        }
        break;
      }
      case Kind::kString:
        text(v->str);
        break;
      case Kind::kTuple:
      case Kind::kList: {
        out_ += '[';
        for (size_t i = 0; i < v->items.size(); ++i) {
          if (i) out_ += ", ";
          add(v->items[i], depth + 1);
          check_size();
        }
        out_ += ']';
        break;
      }
      case Kind::kDict: {
        out_ += '{';
        for (size_t i = 0; i < v->entries.size(); ++i) {
          const auto& [k, val] = v->entries[i];
          if (!k->is(Kind::kString)) refuse("a nested dict with the key " + describe(*k));
          if (i) out_ += ", ";
          text(k->str);
          out_ += ": ";
          add(val, depth + 1);
          check_size();
        }
        out_ += '}';
        break;
      }
      default:
        if (is_tensor_call(v)) {
          refuse(
              "a tensor nested inside it (a training checkpoint? save only the model's "
              "state_dict())");
        }
        refuse(describe(*v));
    }
  }

  const std::string& path_;
  const std::string& key_;
  size_t limit_;
  std::string out_;
};

class PthReader {
 public:
  explicit PthReader(std::shared_ptr<MappedFile> file)
      : file_(file), path_(file->path()), zip_(std::move(file)) {}

  TensorSet read();

 private:
  [[noreturn]] void fail(const std::string& tensor, const std::string& expected,
                         const std::string& found) const {
    throw FormatError(path_, tensor, expected, found);
  }
  int64_t get_int(const std::string& tensor, const PickleValue* v, const char* what) const {
    if (!v->is(Kind::kInt)) fail(tensor, std::string("an int ") + what, describe(*v));
    return v->integer;
  }
  std::vector<int64_t> get_ints(const std::string& tensor, const PickleValue* v,
                                const char* what) const {
    if (!v->is(Kind::kTuple) && !v->is(Kind::kList)) {
      fail(tensor, std::string("a tuple of ints as ") + what, describe(*v));
    }
    if (v->items.size() > kMaxDims) {
      fail(tensor, "at most " + std::to_string(kMaxDims) + " dimensions",
           std::to_string(v->items.size()));
    }
    std::vector<int64_t> out;
    for (const PickleValue* x : v->items) out.push_back(get_int(tensor, x, what));
    return out;
  }
  TensorView tensor(const std::string& name, const PickleValue* call);

  std::shared_ptr<MappedFile> file_;
  std::string path_;
  ZipReader zip_;
  std::string prefix_;
};

TensorView PthReader::tensor(const std::string& name, const PickleValue* call) {
  // _rebuild_parameter(data, requires_grad, backward_hooks): the tensor is `data`.
  if (call->callable->name == "_rebuild_parameter") {
    const auto& pargs = call->args->items;
    if (pargs.size() != 3 || !pargs[0]->is(Kind::kCall) ||
        pargs[0]->callable->name != "_rebuild_tensor_v2") {
      fail(name, "_rebuild_parameter(tensor, requires_grad, backward_hooks)",
           "arguments " + std::to_string(pargs.size()) + " starting with " +
               (pargs.empty() ? std::string("nothing") : describe(*pargs[0])));
    }
    call = pargs[0];
  }
  const auto& args = call->args->items;
  if (args.size() != 6 && args.size() != 7) {
    fail(name,
         "_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, "
         "backward_hooks[, metadata])",
         std::to_string(args.size()) + " arguments");
  }
  // Persistent id: ('storage', torch.<T>Storage, key, location, numel).
  const PickleValue* pid = args[0]->is(Kind::kPersistentId) ? args[0]->args : nullptr;
  if (!pid || !pid->is(Kind::kTuple) || pid->items.size() != 5 ||
      !pid->items[0]->is(Kind::kString) || pid->items[0]->str != "storage" ||
      !pid->items[1]->is(Kind::kGlobal) || !pid->items[2]->is(Kind::kString) ||
      !pid->items[4]->is(Kind::kInt)) {
    fail(name,
         "a storage persistent id ('storage', torch.<T>Storage, key, location, numel) as "
         "first argument",
         pid ? describe(*pid) : describe(*args[0]));
  }
  const PickleValue* type = pid->items[1];
  TensorView t;
  t.name = name;
  if (type->module != "torch" || !storage_dtype(type->name, &t.dtype)) {
    fail(name,
         "a storage of float32, float16, bfloat16 or an integer type (torch.FloatStorage, "
         "HalfStorage, BFloat16Storage, Int/Long/Short/Char/ByteStorage)",
         "torch." + std::string(type->name) + " (convert the checkpoint to float32/bfloat16)");
  }
  const std::string key(pid->items[2]->str);
  const int64_t storage_numel = pid->items[4]->integer;
  const uint64_t esize = dtype_size(t.dtype);
  const std::string entry_name = prefix_ + "/data/" + key;
  const ZipEntry* entry = zip_.find(entry_name);
  if (!entry) {
    fail(name, "its storage in the zip entry '" + entry_name + "'", "no such entry");
  }
  uint64_t storage_bytes = 0;
  const uint8_t* storage = nullptr;
  try {
    storage = zip_.data(*entry, &storage_bytes);
  } catch (const FormatError& e) {
    fail(name, e.expected(), e.found());
  }
  uint64_t want_bytes = 0;
  if (storage_numel < 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(storage_numel), esize, &want_bytes) ||
      want_bytes != storage_bytes) {
    fail(name,
         "storage '" + entry_name + "' of " + num(storage_numel) + " x " +
             std::string(dtype_name(t.dtype)) + " = " +
             (storage_numel < 0 ? std::string("(negative)") : std::to_string(want_bytes)) +
             " bytes, as its persistent id says",
         std::to_string(storage_bytes) + " bytes in the zip entry");
  }

  const int64_t offset = get_int(name, args[1], "storage offset");
  t.shape = get_ints(name, args[2], "size");
  const std::vector<int64_t> stride = get_ints(name, args[3], "stride");
  if (stride.size() != t.shape.size()) {
    fail(name, "a stride with one entry per dimension of size " + base::shape_string(t.shape),
         "stride " + base::shape_string(stride));
  }
  int64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) {
      fail(name, "non-negative dimensions with a representable product",
           "size " + base::shape_string(t.shape));
    }
  }
  // Row-major contiguous (dimensions of size 1 may carry any stride, as in PyTorch).
  if (numel > 0) {
    int64_t expect = 1;
    for (size_t i = t.shape.size(); i-- > 0;) {
      if (t.shape[i] != 1 && stride[i] != expect) {
        std::vector<int64_t> want(t.shape.size());
        int64_t s = 1;
        for (size_t j = t.shape.size(); j-- > 0;) {
          want[j] = s;
          s *= t.shape[j];
        }
        fail(name,
             "a row-major contiguous tensor: stride " + base::shape_string(want) + " for size " +
                 base::shape_string(t.shape),
             "stride " + base::shape_string(stride) +
                 " (a transposed or sliced view; save tensor.contiguous() instead)");
      }
      expect *= t.shape[i];
    }
  }
  int64_t end = 0;
  if (offset < 0 || __builtin_add_overflow(offset, numel, &end) || end > storage_numel) {
    fail(name,
         "storage_offset + numel <= " + num(storage_numel) + " (the elements in storage '" +
             entry_name + "')",
         "storage_offset " + num(offset) + " + numel " + num(numel) + " for size " +
             base::shape_string(t.shape));
  }
  t.data = storage + static_cast<uint64_t>(offset) * esize;
  t.nbytes = static_cast<size_t>(static_cast<uint64_t>(numel) * esize);
  return t;
}

TensorSet PthReader::read() {
  // The record directory: the one top-level folder holding data.pkl.
  const ZipEntry* pkl = nullptr;
  for (const ZipEntry& e : zip_.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && slash > 0 &&
        e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pkl) {
        fail("", "one '<name>/data.pkl' entry (a single torch.save record)",
             "both '" + pkl->name + "' and '" + e.name + "'");
      }
      pkl = &e;
    }
  }
  if (!pkl) {
    fail("", "a torch.save zip archive with a '<name>/data.pkl' entry",
         "none among its " + std::to_string(zip_.entries().size()) +
             " entries (not a PyTorch checkpoint? pre-1.6 non-zip .pth files are not supported)");
  }
  prefix_.assign(pkl->name, 0, pkl->name.find('/'));

  if (const ZipEntry* bo = zip_.find(prefix_ + "/byteorder")) {
    uint64_t n = 0;
    const uint8_t* p = zip_.data(*bo, &n);
    const std::string_view order(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    if (order != "little") {
      std::string found = "'";
      found.append(order.substr(0, 16));
      found += "' (big-endian checkpoints are not supported)";
      fail("", "byte order 'little' in '" + bo->name + "'", found);
    }
  }

  uint64_t pkl_size = 0;
  const uint8_t* pkl_data = zip_.data(*pkl, &pkl_size);
  const Unpickled pickled =
      unpickle(pkl_data, static_cast<size_t>(pkl_size), path_, "zip entry '" + pkl->name + "'");
  const PickleValue* root = pickled.root();
  if (!root->is(Kind::kDict)) {
    fail("", "a state dict (dict or OrderedDict of name -> tensor) as the pickled object",
         describe(*root));
  }

  TensorSet set(path_);
  set.keep_alive(file_);
  size_t metadata_bytes = 0;  // <= kMaxMetadataTotal
  for (const auto& [k, v] : root->entries) {
    if (!k->is(Kind::kString)) {
      fail("", "str keys (tensor names) in the state dict", describe(*k));
    }
    const std::string name(k->str);
    if (is_tensor_call(v)) {
      set.add(tensor(name, v));
    } else {
      if (set.metadata().count(name)) {
        fail(name, "each key once in the state dict", "a second value with this key");
      }
      std::string json = JsonWriter(path_, name, kMaxMetadataTotal - metadata_bytes).write(v);
      metadata_bytes += json.size();
      set.metadata()[name] = std::move(json);
    }
  }
  for (const auto& [name, text] : set.metadata()) {
    if (set.find(name)) fail(name, "each key once in the state dict", "a tensor and a value");
  }
  return set;
}

}  // namespace

bool looks_like_zip(const MappedFile& file) {
  const uint8_t* p = file.data();
  return file.size() >= 4 && p[0] == 'P' && p[1] == 'K' && p[2] == 3 && p[3] == 4;
}

TensorSet read_pth(std::shared_ptr<MappedFile> file) {
  PthReader reader(std::move(file));
  return reader.read();
}

}  // namespace wick::io
