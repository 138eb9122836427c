// `.rwkvq` reader: safetensors container + manifest (docs/rwkvq-format.md §1), validated strictly
// before any tensor is used. The safetensors layer (io/safetensors.h) already guarantees that
// every buffer lies inside the file with a size equal to shape x dtype; this layer checks that
// the buffers are exactly the ones each record's layout needs, with the shapes its logical shape
// and bits imply.
#include "quant/rwkvq.h"

#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "base/strings.h"
#include "io/json_limits.h"
#include "io/safetensors.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

using nlohmann::json;

constexpr int kMaxFormatVersion = 2;
// Field names in the order of §1.4.
const char* const kFieldNames[] = {
    "codes", "codes_packed", "scale", "dense",  "outlier_indices", "outlier_values", "gw_d",
    "gw_dm", "gw_qsqm",      "gw_qh", "gw_qh2", "gw_scale",        "gw_min",         "gw_qs"};

class RecordParser {
 public:
  RecordParser(const std::string& path, const std::string& key, const json& rec)
      : path_(path), key_(key), rec_(rec) {}

  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw FormatError(path_, key_, expected, found);
  }

  const json& field(const char* name, bool required = true) const {
    static const json kNull;
    if (!rec_.contains(name)) {
      if (required) fail(std::string("a manifest record with the key '") + name + "'", "none");
      return kNull;
    }
    return rec_.at(name);
  }
  int64_t integer(const char* name, bool required = true, int64_t fallback = 0) const {
    const json& v = field(name, required);
    if (v.is_null() && !required) return fallback;
    if (!v.is_number_integer()) {
      fail(std::string("an integer '") + name + "' in the manifest record", io::brief_json(v));
    }
    return v.get<int64_t>();
  }
  std::string string(const char* name) const {
    const json& v = field(name);
    if (!v.is_string())
      fail(std::string("a string '") + name + "' in the manifest record", io::brief_json(v));
    return v.get<std::string>();
  }

 private:
  const std::string& path_;
  const std::string& key_;
  const json& rec_;
};

Layout parse_layout(const std::string& kind, const RecordParser& p) {
  if (kind == "dense") return Layout::kDense;
  if (kind == "sb6") return Layout::kSb6;
  if (kind == "sym") return Layout::kSym;
  if (kind == "asym") return Layout::kAsym;
  if (kind == "rtn") return Layout::kRtn;
  p.fail(
      "a layout kind among dense, sb6, sym, asym, rtn (this wick reads rwkv-quant format "
      "versions up to 2; a newer writer may have added layouts)",
      "'" + kind + "'");
}

// Checks one buffer of a record: present, dtype and shape as the layout requires.
const io::TensorView* require(const io::TensorSet& set, const std::string& path,
                              const std::string& key, const char* field, DType dtype,
                              const std::vector<int64_t>& shape, const std::string& why) {
  const std::string name = key + "::" + field;
  const io::TensorView* v = set.find(name);
  if (v == nullptr) {
    throw FormatError(path, key, std::string("buffer '") + name + "' (" + why + ")",
                      "none in the file");
  }
  if (v->dtype != dtype) {
    throw FormatError(path, name,
                      std::string("dtype ") + std::string(dtype_name(dtype)) + " (" + why + ")",
                      std::string(dtype_name(v->dtype)));
  }
  if (v->shape != shape) {
    throw FormatError(path, name, "shape " + base::shape_string(shape) + " (" + why + ")",
                      base::shape_string(v->shape));
  }
  return v;
}

bool is_world_lora(const std::string& key) {
  static const std::regex re(R"(^blocks\.\d+\.att\.[wavg][12]$)");
  return std::regex_match(key, re);
}

void validate_layout(QuantTensor& t, const io::TensorSet& set, const std::string& path,
                     const std::set<std::string>& fields, const RecordParser& p,
                     int64_t record_bits, bool has_n_blocks, int64_t n_blocks_record) {
  auto has = [&](const char* f) { return fields.count(f) != 0; };
  auto need = [&](const char* f, DType dt, std::vector<int64_t> shape, const std::string& why) {
    if (!has(f))
      p.fail(std::string("'") + f + "' in the record's fields (" + why + ")",
             "a fields list without it");
    return require(set, path, t.key, f, dt, shape, why);
  };
  auto only = [&](std::initializer_list<const char*> allowed) {
    for (const std::string& f : fields) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || f == a;
      if (!ok) {
        p.fail("only the buffers of the " + std::string(layout_name(t.layout)) + " layout",
               "field '" + f + "'");
      }
    }
  };
  const bool two_d = t.shape.size() == 2;
  const int64_t rows = t.rows(), in = t.cols();
  auto need_2d = [&] {
    if (!two_d)
      p.fail("a 2-D shape for the " + std::string(layout_name(t.layout)) + " layout",
             base::shape_string(t.shape));
  };
  auto check_bits = [&](int actual, const std::string& evidence) {
    t.bits = actual;
    if (record_bits != actual) {
      p.fail("bits " + std::to_string(actual) + " (" + evidence + ")",
             "bits " + std::to_string(record_bits) +
                 " in the manifest; the record and its buffers disagree");
    }
  };
  switch (t.layout) {
    case Layout::kDense: {
      only({"dense"});
      if (!has("dense")) p.fail("'dense' in the record's fields", "none");
      const io::TensorView* v = set.find(t.key + "::dense");
      if (!v) throw FormatError(path, t.key, "buffer '" + t.key + "::dense'", "none in the file");
      if (!is_float_dtype(v->dtype)) {
        throw FormatError(path, t.key + "::dense", "dtype BF16 (or F16/F32)",
                          std::string(dtype_name(v->dtype)));
      }
      if (v->shape != t.shape) {
        throw FormatError(path, t.key + "::dense",
                          "shape " + base::shape_string(t.shape) + " (the record's shape)",
                          base::shape_string(v->shape));
      }
      t.dense = v;
      if (record_bits < 16)
        p.fail("bits 16 for a dense tensor", "bits " + std::to_string(record_bits));
      t.bits = 16;
      break;
    }
    case Layout::kSb6: {
      need_2d();
      only({"codes_packed", "gw_d", "gw_dm", "gw_qsqm", "gw_qh", "gw_qh2"});
      if (t.gs != 32 || t.sb != 8) {
        p.fail("gw_gs 32 and gw_sb 8 for sb6 (the only block geometry rwkv-quant writes)",
               "gw_gs " + std::to_string(t.gs) + ", gw_sb " + std::to_string(t.sb));
      }
      if (in % 256 != 0 || in == 0)
        p.fail("a column count that is a multiple of 256 for sb6", std::to_string(in));
      const int64_t nsb = in / 256;
      t.codes_packed = need("codes_packed", DType::U8, {rows, in / 2}, "4 low bits per code");
      t.gw_qsqm = need("gw_qsqm", DType::U8, {rows, nsb, 12}, "6-bit qs and qm per block");
      t.gw_d = need("gw_d", DType::F16, {rows, nsb}, "superblock scale of qs");
      t.gw_dm = need("gw_dm", DType::F16, {rows, nsb}, "superblock scale of qm");
      if (has("gw_qh")) t.gw_qh = need("gw_qh", DType::U8, {rows, in / 8}, "bit 4 of each code");
      if (has("gw_qh2")) {
        if (!t.gw_qh)
          p.fail("gw_qh alongside gw_qh2 (6-bit codes need both bit planes)", "gw_qh2 alone");
        t.gw_qh2 = need("gw_qh2", DType::U8, {rows, in / 8}, "bit 5 of each code");
      }
      check_bits(t.gw_qh2  ? 6
                 : t.gw_qh ? 5
                           : 4,
                 t.gw_qh2  ? "both bit planes present"
                 : t.gw_qh ? "one bit plane present"
                           : "no bit plane present");
      t.n_blocks = in / 32;
      break;
    }
    case Layout::kSym: {
      need_2d();
      only({"codes", "codes_packed", "gw_qh", "gw_qh2", "gw_qs", "gw_d"});
      if (t.gs != 16 || t.sb != 16) {
        p.fail("gw_gs 16 and gw_sb 16 for sym (the only block geometry rwkv-quant writes)",
               "gw_gs " + std::to_string(t.gs) + ", gw_sb " + std::to_string(t.sb));
      }
      if (in % 256 != 0 || in == 0)
        p.fail("a column count that is a multiple of 256 for sym", std::to_string(in));
      if (has("codes")) {
        if (has("codes_packed")) p.fail("either 'codes' (8-bit) or 'codes_packed' (6-bit)", "both");
        t.codes = need("codes", DType::I8, {rows, in}, "signed 8-bit codes");
        check_bits(8, "an I8 codes buffer");
      } else {
        t.codes_packed =
            need("codes_packed", DType::U8, {rows, in / 2}, "4 low bits of 6-bit codes");
        t.gw_qh = need("gw_qh", DType::U8, {rows, in / 8}, "bit 4 of 6-bit codes");
        t.gw_qh2 = need("gw_qh2", DType::U8, {rows, in / 8}, "bit 5 of 6-bit codes");
        check_bits(6, "packed codes with two bit planes");
      }
      t.gw_qs = need("gw_qs", DType::I8, {rows, in / 16}, "per-block scale codes");
      t.gw_d = need("gw_d", DType::F16, {rows, in / 256}, "superblock scale");
      t.n_blocks = in / 16;
      break;
    }
    case Layout::kAsym: {
      need_2d();
      only({"codes", "gw_scale", "gw_min"});
      if (t.gs <= 0) p.fail("a positive gw_gs (block width) for asym", std::to_string(t.gs));
      if (record_bits < 1 || record_bits > 8)
        p.fail("bits 1..8 for asym", std::to_string(record_bits));
      t.bits = static_cast<int>(record_bits);
      const int64_t nb = (in + t.gs - 1) / t.gs;
      t.codes = need("codes", DType::U8, {rows, in}, "one unsigned code per byte");
      t.gw_scale =
          need("gw_scale", DType::F32, {rows, nb}, "per-block scale, ceil(IN / gs) blocks");
      t.gw_min = need("gw_min", DType::F32, {rows, nb}, "per-block minimum, ceil(IN / gs) blocks");
      t.n_blocks = nb;
      break;
    }
    case Layout::kRtn: {
      only({"codes", "codes_packed", "scale", "outlier_indices", "outlier_values"});
      if (t.shape.size() < 2)
        p.fail("a tensor of 2 or more dimensions for rtn", base::shape_string(t.shape));
      if (has("codes")) {
        if (has("codes_packed")) p.fail("either 'codes' or 'codes_packed'", "both");
        t.codes = need("codes", DType::I8, t.shape, "signed codes of the tensor's shape");
        if (record_bits < 5 || record_bits > 8) {
          p.fail("bits 5..8 for rtn with an I8 codes buffer", std::to_string(record_bits));
        }
      } else {
        if (!two_d) p.fail("a 2-D shape for nibble-packed rtn", base::shape_string(t.shape));
        t.codes_packed = need("codes_packed", DType::U8, {rows, (in + 1) / 2}, "biased nibbles");
        if (record_bits < 2 || record_bits > 4) {
          p.fail("bits 2..4 for nibble-packed rtn", std::to_string(record_bits));
        }
      }
      t.bits = static_cast<int>(record_bits);
      std::vector<int64_t> sshape(t.shape.size(), 1);
      sshape[0] = rows;
      t.scale = need("scale", DType::F16, sshape, "one fp16 scale per row");
      if (has("outlier_indices") != has("outlier_values")) {
        p.fail("outlier_indices and outlier_values together", "only one of them");
      }
      if (has("outlier_indices")) {
        const io::TensorView* idx = set.find(t.key + "::outlier_indices");
        if (!idx)
          throw FormatError(path, t.key, "buffer '" + t.key + "::outlier_indices'",
                            "none in the file");
        if (idx->dtype != DType::I32 || idx->shape.size() != 2 || idx->shape[1] != 2) {
          throw FormatError(
              path, t.key + "::outlier_indices", "I32 [n, 2] (row, column) pairs",
              std::string(dtype_name(idx->dtype)) + " " + base::shape_string(idx->shape));
        }
        const int64_t n = idx->shape[0];
        t.outlier_indices = idx;
        t.outlier_values = need("outlier_values", DType::BF16, {n}, "one bf16 value per outlier");
        for (int64_t i = 0; i < n; ++i) {
          int32_t rc[2];
          std::memcpy(rc, idx->data + 8 * i, 8);
          if (rc[0] < 0 || rc[0] >= rows || rc[1] < 0 || rc[1] >= in) {
            throw FormatError(
                path, t.key + "::outlier_indices",
                "positions inside [" + std::to_string(rows) + ", " + std::to_string(in) + "]",
                "(" + std::to_string(rc[0]) + ", " + std::to_string(rc[1]) + ") at entry " +
                    std::to_string(i));
          }
        }
      }
      break;
    }
  }
  if (has_n_blocks &&
      (t.layout == Layout::kSb6 || t.layout == Layout::kSym || t.layout == Layout::kAsym) &&
      n_blocks_record != t.n_blocks) {
    p.fail("n_blocks " + std::to_string(t.n_blocks) + " (from the shape and block width)",
           std::to_string(n_blocks_record));
  }
}

}  // namespace

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::kDense:
      return "dense";
    case Layout::kSb6:
      return "sb6";
    case Layout::kSym:
      return "sym";
    case Layout::kAsym:
      return "asym";
    case Layout::kRtn:
      return "rtn";
  }
  return "?";
}

int64_t QuantTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<const io::TensorView*> QuantTensor::buffers() const {
  std::vector<const io::TensorView*> out;
  for (const io::TensorView* v :
       {codes, codes_packed, scale, dense, outlier_indices, outlier_values, gw_d, gw_dm, gw_qsqm,
        gw_qh, gw_qh2, gw_scale, gw_min, gw_qs})
    if (v) out.push_back(v);
  return out;
}

uint64_t QuantTensor::stored_bytes() const {
  uint64_t b = 0;
  for (const io::TensorView* v : buffers()) b += v->nbytes;
  return b;
}

std::string QuantTensor::describe() const {
  if (layout == Layout::kDense)
    return "dense " + std::string(dtype_name(dense ? dense->dtype : DType::BF16));
  return std::string(layout_name(layout)) + "@" + std::to_string(bits);
}

bool RwkvqFile::is_rwkvq(const io::TensorSet& set) {
  return set.metadata().count("rwkvq") != 0;
}

bool RwkvqFile::is_zip(const io::MappedFile& f) {
  static const uint8_t kZip[] = {0x50, 0x4b, 0x03, 0x04};
  return f.size() >= 4 && std::memcmp(f.data(), kZip, 4) == 0;
}

RwkvqFile RwkvqFile::open(std::shared_ptr<io::MappedFile> file) {
  if (is_zip(*file)) {
    throw CheckpointError(file->path(),
                          "this is a zip file: a legacy pickle .rwkvq (rwkv-quant before "
                          "the safetensors container) or a PyTorch checkpoint; re-save "
                          "it with a current rwkv-quant, which writes safetensors");
  }
  return from_tensor_set(io::read_safetensors(std::move(file)));
}

RwkvqFile RwkvqFile::from_tensor_set(io::TensorSet set_in) {
  RwkvqFile f;
  f.set_ = std::make_shared<io::TensorSet>(std::move(set_in));
  const io::TensorSet& set = *f.set_;
  const std::string& path = set.source();
  auto meta = set.metadata().find("rwkvq");
  if (meta == set.metadata().end()) {
    throw FormatError(path, "", "an .rwkvq file (safetensors metadata with the key \"rwkvq\")",
                      "a safetensors file without it");
  }
  auto m = std::make_shared<Manifest>();
  m->text = meta->second;
  json j = io::parse_json_limited(m->text, path, ".rwkvq manifest", io::JsonLimits{8, 1 << 22});
  if (!j.is_object())
    throw FormatError(path, "", "a JSON object as the .rwkvq manifest", io::brief_json(j));
  auto get = [&](const char* k) -> const json& {
    static const json kNull;
    return j.contains(k) ? j.at(k) : kNull;
  };
  if (!get("format").is_string() || get("format").get<std::string>() != "rwkvq") {
    throw FormatError(path, "", "manifest \"format\": \"rwkvq\"", io::brief_json(get("format")));
  }
  if (!get("format_version").is_null()) {
    if (!get("format_version").is_number_integer()) {
      throw FormatError(path, "", "an integer manifest format_version",
                        io::brief_json(get("format_version")));
    }
    m->format_version = get("format_version").get<int>();
  }
  if (m->format_version < 0 || m->format_version > kMaxFormatVersion) {
    throw CheckpointError(path, ".rwkvq format_version " + std::to_string(m->format_version) +
                                    " is not supported: this wick reads versions 0 to " +
                                    std::to_string(kMaxFormatVersion) + "; update wick");
  }
  auto int_key = [&](const char* k, int64_t* out) {
    if (!get(k).is_number_integer() || get(k).get<int64_t>() <= 0) {
      throw FormatError(path, "", std::string("a positive integer manifest '") + k + "'",
                        io::brief_json(get(k)));
    }
    *out = get(k).get<int64_t>();
  };
  if (!get("naming").is_string())
    throw FormatError(path, "", "a string manifest 'naming'", io::brief_json(get("naming")));
  m->naming = get("naming").get<std::string>();
  int_key("n_layer", &m->n_layer);
  int_key("n_embd", &m->n_embd);
  int_key("head_size", &m->head_size);
  int_key("vocab_size", &m->vocab_size);
  if (get("config_repr").is_string()) m->config_repr = get("config_repr").get<std::string>();
  m->config = get("config");
  if (get("tokenizer").is_string()) m->tokenizer = get("tokenizer").get<std::string>();
  const json& tensors = get("tensors");
  if (!tensors.is_object() || tensors.empty()) {
    throw FormatError(path, "", "a non-empty manifest 'tensors' object", io::brief_json(tensors));
  }

  // nlohmann::json sorts object keys; the manifest order comes from a second, order-keeping
  // parse (the text already passed the limits above).
  std::vector<std::string> order;
  {
    const nlohmann::ordered_json oj = nlohmann::ordered_json::parse(m->text);
    for (auto it = oj["tensors"].begin(); it != oj["tensors"].end(); ++it)
      order.push_back(it.key());
  }

  auto list = std::make_shared<std::vector<QuantTensor>>();
  std::set<std::string> claimed;
  for (const std::string& key : order) {
    const json& rec = tensors.at(key);
    if (!rec.is_object())
      throw FormatError(path, key, "an object as the manifest record", io::brief_json(rec));
    RecordParser p(path, key, rec);
    QuantTensor t;
    t.key = key;
    t.layout = parse_layout(p.string("kind"), p);
    const json& shape = p.field("shape");
    if (!shape.is_array() || shape.empty())
      p.fail("a non-empty integer list 'shape'", io::brief_json(shape));
    for (const json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0 ||
          d.get<int64_t>() > (int64_t{1} << 40)) {
        p.fail("positive dimensions in 'shape'", io::brief_json(shape));
      }
      t.shape.push_back(d.get<int64_t>());
    }
    const int64_t record_bits = p.integer("bits");
    t.group = p.string("group");
    t.gs = static_cast<int>(p.integer("gw_gs"));
    t.sb = static_cast<int>(p.integer("gw_sb"));
    const bool has_n_blocks = rec.contains("n_blocks");
    const int64_t n_blocks = has_n_blocks ? p.integer("n_blocks") : 0;
    if (rec.contains("transposed")) {
      if (!rec["transposed"].is_boolean())
        p.fail("a boolean 'transposed'", io::brief_json(rec["transposed"]));
      t.transposed = rec["transposed"].get<bool>();
    } else {
      t.transposed = m->naming == "world" && is_world_lora(key);
    }
    const json& fields = p.field("fields");
    if (!fields.is_array()) p.fail("a list 'fields'", io::brief_json(fields));
    std::set<std::string> fset;
    for (const json& fj : fields) {
      if (!fj.is_string()) p.fail("field names as strings", io::brief_json(fj));
      const std::string fname = fj.get<std::string>();
      bool known = false;
      for (const char* k : kFieldNames) known = known || fname == k;
      if (!known)
        p.fail("field names from the format (codes, codes_packed, scale, dense, gw_*, outlier_*)",
               "'" + fname + "'");
      if (!fset.insert(fname).second) p.fail("each field once", "'" + fname + "' twice");
      if (!set.find(key + "::" + fname)) {
        throw FormatError(path, key,
                          "buffer '" + key + "::" + fname + "' listed in the record's fields",
                          "none in the file");
      }
      claimed.insert(key + "::" + fname);
    }
    validate_layout(t, set, path, fset, p, record_bits, has_n_blocks, n_blocks);
    list->push_back(std::move(t));
  }
  for (const io::TensorView& v : set.tensors()) {
    if (!claimed.count(v.name)) {
      throw FormatError(path, v.name, "only buffers that a manifest record lists in its fields",
                        "a buffer no record claims (the manifest and the tensors disagree)");
    }
  }
  // The manifest's geometry must describe these tensors.
  for (const QuantTensor& t : *list) {
    if (t.key != "emb.weight" || t.shape.size() != 2) continue;
    if (t.shape[0] != m->vocab_size || t.shape[1] != m->n_embd) {
      throw FormatError(path, "emb.weight",
                        "shape [vocab_size, n_embd] = [" + std::to_string(m->vocab_size) + ", " +
                            std::to_string(m->n_embd) + "] as the manifest says",
                        base::shape_string(t.shape));
    }
  }
  f.manifest_ = std::move(m);
  f.tensors_ = std::move(list);
  return f;
}

const QuantTensor* RwkvqFile::find(const std::string& key) const {
  for (const QuantTensor& t : *tensors_)
    if (t.key == key) return &t;
  return nullptr;
}

}  // namespace wick::quant
