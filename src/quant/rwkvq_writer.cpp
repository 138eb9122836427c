// `.rwkvq` container writer (docs/rwkvq-format.md §1.1-1.4).
#include "quant/rwkvq_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/utf8.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

// Python's float repr: the shortest digits that read back to the same double, in fixed notation
// when the decimal exponent is in [-4, 16), else in exponent notation with a sign and at least
// two exponent digits; a fixed number always carries a fractional part ("1.0").
std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  // Shortest round-trip digits in scientific form: "d[.ddd]e[+-]XX".
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(s.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS x 10^decpt
  const int nd = static_cast<int>(digits.size());
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (nd > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    char eb[32];
    std::snprintf(eb, sizeof(eb), "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= nd) {
    out = digits + std::string(static_cast<size_t>(decpt - nd), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(decpt)) + "." +
          digits.substr(static_cast<size_t>(decpt));
  }
  return sign + out;
}

void append_u_escape(std::string& out, uint32_t unit) {
  char b[16];
  std::snprintf(b, sizeof(b), "\\u%04x", unit);
  out += b;
}

// A JSON string literal as json.dumps(ensure_ascii=True) writes it.
void append_python_string(std::string& out, const std::string& s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    // Surrogates pass, as json.dumps writes a str that carries them (a pickle's names may).
    const base::utf8::Seq q = base::utf8::next_sequence(s, i, base::utf8::Surrogates::kAllow);
    if (q.kind != base::utf8::SeqKind::kValid)
      throw Error("manifest writer: a string is not valid UTF-8");
    const uint32_t cp = q.code_point;
    i += q.length;
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp >= 0x20 && cp <= 0x7e) {
      out += static_cast<char>(cp);
    } else if (cp > 0xffff) {
      const uint32_t v = cp - 0x10000;
      append_u_escape(out, 0xd800 | (v >> 10));
      append_u_escape(out, 0xdc00 | (v & 0x3ff));
    } else {
      append_u_escape(out, cp);
    }
  }
  out += '"';
}

void dump_python(const nlohmann::ordered_json& v, std::string& out) {
  using T = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case T::null:
      out += "null";
      return;
    case T::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case T::number_integer:
      out += std::to_string(v.get<int64_t>());
      return;
    case T::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      return;
    case T::number_float:
      out += python_float_repr(v.get<double>());
      return;
    case T::string:
      append_python_string(out, v.get_ref<const std::string&>());
      return;
    case T::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        dump_python(e, out);
      }
      out += ']';
      return;
    }
    case T::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        append_python_string(out, it.key());
        out += ": ";
        dump_python(it.value(), out);
      }
      out += '}';
      return;
    }
    default:
      throw Error("manifest writer: a JSON value of type " + std::string(v.type_name()) +
                  " has no json.dumps form");
  }
}

bool has_zero_dim(const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    if (d == 0) return true;
  return false;
}

// The header bytes (8-byte length + padded JSON) for the buffers in container order, and each
// kept buffer's byte count.
std::string layout_header(const std::string& manifest, const std::vector<BufferSpec>& buffers,
                          std::vector<size_t>* order, std::vector<uint64_t>* sizes,
                          const std::map<std::string, std::string>& metadata = {}) {
  *order = container_order(buffers);
  std::vector<io::TensorSpec> specs;
  specs.reserve(order->size());
  for (size_t i : *order) specs.push_back({buffers[i].name, buffers[i].dtype, buffers[i].shape});
  // Names must be unique over all buffers, including skipped empty ones.
  std::set<std::string> names;
  for (const BufferSpec& b : buffers) {
    if (!names.insert(b.name).second) {
      throw Error("rwkvq writer: buffer '" + b.name + "' is given twice; names must be unique");
    }
  }
  if (metadata.count("rwkvq")) {
    throw Error("rwkvq writer: the metadata key \"rwkvq\" holds the manifest; pass it as such");
  }
  std::map<std::string, std::string> meta = metadata;
  meta["rwkvq"] = manifest;
  return io::safetensors_header(specs, meta, sizes);
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& v) {
  std::string out;
  dump_python(v, out);
  return out;
}

std::string manifest_text(const ManifestHeader& h, const std::vector<TensorRecord>& records) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  m["format"] = "rwkvq";
  m["format_version"] = h.format_version;
  m["naming"] = h.naming;
  m["n_layer"] = h.n_layer;
  m["n_embd"] = h.n_embd;
  m["head_size"] = h.head_size;
  m["vocab_size"] = h.vocab_size;
  m["config_repr"] = h.config_repr;
  m["config"] = h.config;
  m["tokenizer"] = h.tokenizer ? nlohmann::ordered_json(*h.tokenizer) : nlohmann::ordered_json();
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const TensorRecord& r : records) {
    if (tensors.contains(r.key)) {
      throw Error("manifest writer: tensor '" + r.key + "' is given twice");
    }
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["kind"] = r.kind;
    e["shape"] = r.shape;
    e["bits"] = r.bits;
    e["group"] = r.group;
    e["gw_gs"] = r.gw_gs;
    e["gw_sb"] = r.gw_sb;
    e["n_blocks"] = r.n_blocks;
    e["transposed"] = r.transposed;
    e["fields"] = r.fields;
    tensors[r.key] = std::move(e);
  }
  m["tensors"] = std::move(tensors);
  return python_json_dumps(m);
}

int safetensors_dtype_rank(DType t) {
  // Rust safetensors Dtype enum: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32,
  // F32, F64, I64, U64.
  switch (t) {
    case DType::U8:
      return 1;
    case DType::I8:
      return 2;
    case DType::I16:
      return 5;
    case DType::F16:
      return 7;
    case DType::BF16:
      return 8;
    case DType::I32:
      return 9;
    case DType::F32:
      return 11;
    case DType::I64:
      return 13;
  }
  return -1;
}

std::vector<size_t> container_order(const std::vector<BufferSpec>& buffers) {
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!has_zero_dim(buffers[i].shape)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int ra = safetensors_dtype_rank(buffers[a].dtype);
    const int rb = safetensors_dtype_rank(buffers[b].dtype);
    if (ra != rb) return ra > rb;
    // std::string compares bytes as unsigned char: byte-wise ascending like Rust's String order.
    return buffers[a].name < buffers[b].name;
  });
  return order;
}

std::string serialize_rwkvq(const std::string& manifest,
                            const std::vector<io::TensorToWrite>& buffers) {
  std::vector<BufferSpec> specs;
  specs.reserve(buffers.size());
  for (const io::TensorToWrite& b : buffers) specs.push_back({b.name, b.dtype, b.shape});
  std::vector<size_t> order;
  std::vector<uint64_t> sizes;
  std::string out = layout_header(manifest, specs, &order, &sizes);
  for (size_t k = 0; k < order.size(); ++k) {
    const io::TensorToWrite& b = buffers[order[k]];
    if (b.bytes.size() != sizes[k]) {
      throw Error("rwkvq writer: buffer '" + b.name + "': expected " + std::to_string(sizes[k]) +
                  " bytes, found " + std::to_string(b.bytes.size()));
    }
    out.append(b.bytes.data(), b.bytes.size());
  }
  return out;
}

uint64_t write_rwkvq(const std::string& path, const std::string& manifest,
                     const std::vector<io::TensorToWrite>& buffers) {
  std::vector<BufferSpec> specs;
  specs.reserve(buffers.size());
  for (const io::TensorToWrite& b : buffers) specs.push_back({b.name, b.dtype, b.shape});
  RwkvqContainerWriter w(path, manifest, specs);
  for (const io::TensorToWrite& b : buffers) w.write(b.name, b.bytes.data(), b.bytes.size());
  return w.commit();
}

RwkvqContainerWriter::RwkvqContainerWriter(std::string path, const std::string& manifest,
                                           const std::vector<BufferSpec>& buffers,
                                           const std::map<std::string, std::string>& metadata)
    : file_(std::move(path)) {
  std::vector<size_t> order;
  std::vector<uint64_t> sizes;
  const std::string header = layout_header(manifest, buffers, &order, &sizes, metadata);
  uint64_t offset = header.size();
  for (size_t k = 0; k < order.size(); ++k) {
    const BufferSpec& b = buffers[order[k]];
    slots_[b.name] = Slot{offset, sizes[k], false};
    order_.push_back(b.name);
    offset += sizes[k];
  }
  for (const BufferSpec& b : buffers) {
    if (!slots_.count(b.name)) slots_[b.name] = Slot{offset, 0, true};  // empty: nothing to write
  }
  total_ = offset;

  file_.resize(total_);
  file_.write_at(0, header.data(), header.size());
}

void RwkvqContainerWriter::write(const std::string& name, const void* data, size_t n) {
  auto it = slots_.find(name);
  if (it == slots_.end()) throw Error("rwkvq writer: no buffer '" + name + "' was laid out");
  Slot& s = it->second;
  if (s.bytes == 0 && n == 0) return;
  if (s.written) throw Error("rwkvq writer: buffer '" + name + "' is written twice");
  if (n != s.bytes) {
    throw Error("rwkvq writer: buffer '" + name + "': expected " + std::to_string(s.bytes) +
                " bytes, found " + std::to_string(n));
  }
  file_.write_at(s.offset, static_cast<const char*>(data), n);
  s.written = true;
}

uint64_t RwkvqContainerWriter::commit() {
  for (const std::string& name : order_) {
    if (!slots_[name].written) {
      throw Error("rwkvq writer: buffer '" + name + "' was never written");
    }
  }
  file_.commit();
  return total_;
}

}  // namespace wick::quant
