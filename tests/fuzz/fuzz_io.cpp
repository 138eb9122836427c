// Targets for the container readers: safetensors, ZIP, the restricted unpickler, and .pth end to
// end (read as tensors, then loaded as a model and run).
#include <set>
#include <unordered_set>

#include "fuzz/fuzz_target.h"
#include "fuzz/fuzz_models.h"
#include "io/mapped_file.h"
#include "io/pickle.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "io/zip_reader.h"
#include "wick/errors.h"

namespace wick::fuzz {

std::shared_ptr<io::MappedFile> borrow(Bytes in, const std::string& name) {
  return io::MappedFile::borrow(in.data(), in.size(), name);
}

void check_tensor_set(const io::TensorSet& set, const uint8_t* base, size_t size) {
  std::set<std::string> names;
  for (const io::TensorView& t : set.tensors()) {
    WICK_FUZZ_EXPECT(names.insert(t.name).second, "tensor '" + t.name + "' listed twice");
    WICK_FUZZ_EXPECT(set.find(t.name) == &t, "find('" + t.name + "') is another tensor");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      WICK_FUZZ_EXPECT(d >= 0, "tensor '" + t.name + "' has a negative dimension");
      WICK_FUZZ_EXPECT(d == 0 || numel <= UINT64_MAX / static_cast<uint64_t>(d),
                       "tensor '" + t.name + "' overflows its element count");
      numel *= static_cast<uint64_t>(d);
    }
    WICK_FUZZ_EXPECT(t.nbytes == numel * dtype_size(t.dtype),
                     "tensor '" + t.name + "': nbytes " + std::to_string(t.nbytes) + " for " +
                         t.shape_string() + " " + std::string(dtype_name(t.dtype)));
    if (t.nbytes > 0 && base) {
      WICK_FUZZ_EXPECT(t.data >= base && t.nbytes <= size &&
                           static_cast<size_t>(t.data - base) <= size - t.nbytes,
                       "tensor '" + t.name + "' points outside the input");
    }
    if (is_float_dtype(t.dtype)) {
      const int64_t i = io::first_nonfinite(t);
      WICK_FUZZ_EXPECT(i >= -1 && i < static_cast<int64_t>(numel), "first_nonfinite out of range");
    }
  }
}

void check_safetensors(Bytes in) {
  io::TensorSet set = io::read_safetensors(borrow(in, "fuzz.safetensors"));
  check_tensor_set(set, in.data(), in.size());
}

void check_zip(Bytes in) {
  io::ZipReader zip(borrow(in, "fuzz.zip"));
  for (const io::ZipEntry& e : zip.entries()) {
    WICK_FUZZ_EXPECT(e.data_offset <= in.size() && e.compressed_size <= in.size() - e.data_offset,
                     "entry '" + e.name + "' lies outside the archive");
    WICK_FUZZ_EXPECT(e.data == in.data() + e.data_offset, "entry '" + e.name + "': data pointer");
    const io::ZipEntry* f = zip.find(e.name);
    WICK_FUZZ_EXPECT(f && f->name == e.name, "find('" + e.name + "') misses its entry");
    try {
      uint64_t n = 0;
      const uint8_t* p = zip.data(e, &n);
      WICK_FUZZ_EXPECT(p == e.data && n == e.compressed_size, "data('" + e.name + "')");
      WICK_FUZZ_EXPECT(e.method == io::kZipMethodStored && !e.encrypted(),
                       "data() returned a compressed or encrypted entry");
    } catch (const Error&) {
      WICK_FUZZ_EXPECT(e.method != io::kZipMethodStored || e.encrypted(),
                       "data() refused a stored entry '" + e.name + "'");
    }
  }
}

namespace {

// Walks what the unpickler built (cycles are legal in pickles: memo references), bounded.
void walk(const io::PickleValue* v, std::unordered_set<const io::PickleValue*>& seen, int depth) {
  WICK_FUZZ_EXPECT(v != nullptr, "a null value in the unpickled graph");
  if (depth > 10000 || !seen.insert(v).second) return;
  using K = io::PickleValue::Kind;
  if (v->kind == K::kString || v->kind == K::kBytes)
    WICK_FUZZ_EXPECT(v->str.empty() || v->str.data() != nullptr, "a string without bytes");
  for (const io::PickleValue* c : v->items) walk(c, seen, depth + 1);
  for (const auto& [k, x] : v->entries) {
    walk(k, seen, depth + 1);
    walk(x, seen, depth + 1);
  }
}

}  // namespace

void check_pickle(Bytes in) {
  const io::Unpickled u = io::unpickle(in.data(), in.size(), "fuzz.pkl", "the fuzz input");
  WICK_FUZZ_EXPECT(u.root() != nullptr, "no root value");
  WICK_FUZZ_EXPECT(u.value_count() <= in.size() / 2 + io::kPickleLimitSlack,
                   "more values than the limit allows: " + std::to_string(u.value_count()));
  std::unordered_set<const io::PickleValue*> seen;
  walk(u.root(), seen, 0);
  (void)io::describe(*u.root());  // messages describe values: must terminate on any graph
}

void check_pth(Bytes in) {
  {
    io::TensorSet set = io::read_pth(borrow(in, "fuzz.pth"));
    check_tensor_set(set, in.data(), in.size());
  }
  check_model_file(input_file(in, ".pth"));
}

}  // namespace wick::fuzz
