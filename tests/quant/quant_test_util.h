// Helpers of the `.rwkvq` encoder / writer tests: widening source tensors, wrapping an encoded
// tensor into an in-memory RwkvqFile (so the reader's dequantiser can decode it), and scalar
// unpacking of the packed fields written from the spec's byte layouts (docs/rwkvq-format.md §2.1).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor_set.h"
#include "base/fp16.h"
#include "quant/dequant.h"
#include "quant/encode.h"
#include "quant/rwkvq.h"
#include "quant/rwkvq_writer.h"

namespace wick::test {

// Exact float32 values of a source tensor (F32, F16 or BF16).
inline std::vector<float> source_floats(const io::TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::F32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else if (t.dtype == DType::F16) {
      out[i] = base::f16_at(t.data, static_cast<int64_t>(i));
    } else {
      const uint32_t u = (static_cast<uint32_t>(t.data[2 * i]) |
                          (static_cast<uint32_t>(t.data[2 * i + 1]) << 8)) << 16;
      std::memcpy(&out[i], &u, 4);
    }
  }
  return out;
}

// Deterministic Gaussian weights.
inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 0.05f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// half(x) of the spec, for the reference computations.
inline float half_ref(float x) { return base::f16_to_f32(base::f32_to_f16(x)); }
inline float rne_ref(float x) { return std::nearbyint(x); }
inline float clamp_ref(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// §2.1 block-local nibble split: low 4 bits of column `c` of a row whose blocks are `gs` wide.
inline int nibble_at(const uint8_t* row, int gs, int64_t c) {
  const int64_t b = c / gs, j = c % gs, h = gs / 2;
  const uint8_t byte = row[b * h + (j % h)];
  return j < h ? (byte & 15) : (byte >> 4);
}
// §2.1 bit plane: column c is bit c % 8 of byte c / 8.
inline int plane_bit(const uint8_t* row, int64_t c) { return (row[c / 8] >> (c % 8)) & 1; }
// §2.1 6-bit stream: value i of a packed sequence.
inline int six_bit(const uint8_t* p, int i) {
  const uint8_t* g = p + 3 * (i / 4);
  const uint32_t x = g[0] | (g[1] << 8) | (g[2] << 16);
  return static_cast<int>((x >> (6 * (i % 4))) & 63);
}
inline uint16_t u16_at(const uint8_t* p, int64_t i) {
  return static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8));
}
inline float f32_at(const uint8_t* p, int64_t i) {
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}

// The view of field `field` of a parsed tensor, or null.
inline const io::TensorView* field_view(const quant::QuantTensor& t, std::string_view field) {
  if (field == "codes") return t.codes;
  if (field == "codes_packed") return t.codes_packed;
  if (field == "scale") return t.scale;
  if (field == "dense") return t.dense;
  if (field == "outlier_indices") return t.outlier_indices;
  if (field == "outlier_values") return t.outlier_values;
  if (field == "gw_d") return t.gw_d;
  if (field == "gw_dm") return t.gw_dm;
  if (field == "gw_qsqm") return t.gw_qsqm;
  if (field == "gw_qh") return t.gw_qh;
  if (field == "gw_qh2") return t.gw_qh2;
  if (field == "gw_scale") return t.gw_scale;
  if (field == "gw_min") return t.gw_min;
  if (field == "gw_qs") return t.gw_qs;
  return nullptr;
}

// A one-tensor RwkvqFile whose buffers point into `e` (which must outlive it).
inline quant::RwkvqFile wrap_encoded(const std::string& key, const std::vector<int64_t>& shape,
                                     const quant::EncodedTensor& e,
                                     const std::string& group = "proj") {
  quant::ManifestHeader h;
  h.naming = "custom";
  h.n_layer = 1;
  // Geometry consistent with the tensor (the reader checks an emb.weight against it).
  h.n_embd = shape.size() > 1 ? shape[1] : 1;
  h.head_size = 64;
  h.vocab_size = shape.empty() ? 1 : shape[0];
  quant::TensorRecord r;
  r.key = key;
  r.kind = std::string(quant::layout_name(e.layout));
  r.shape = shape;
  r.bits = e.bits;
  r.group = group;
  r.gw_gs = e.gs;
  r.gw_sb = e.sb;
  r.n_blocks = e.n_blocks;
  io::TensorSet set("<encoded " + key + ">");
  for (const quant::EncodedBuffer& b : e.buffers) {
    r.fields.push_back(b.field);
    io::TensorView v;
    v.name = key + "::" + b.field;
    v.dtype = b.dtype;
    v.shape = b.shape;
    v.data = b.bytes.data();
    v.nbytes = b.bytes.size();
    set.add(v);
  }
  set.metadata()["rwkvq"] = quant::manifest_text(h, {r});
  return quant::RwkvqFile::from_tensor_set(std::move(set));
}

// Float64 sum of squared differences.
inline double sse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    s += d * d;
  }
  return s;
}

}  // namespace wick::test
