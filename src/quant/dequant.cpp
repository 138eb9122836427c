// Exact dequantisation of the `.rwkvq` layouts (docs/rwkvq-format.md §2). Every rounding point is
// the spec's: sb6 w = q*s + m (multiply, then add: two roundings, the product being exact except
// at the 1e-8 floor), sym w = q*s (exact), asym w = code*scale + min (multiply-round, add-round:
// this file is compiled without FMA contraction, see src/CMakeLists.txt), rtn w = code*scale.
#include "quant/dequant.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/fp16.h"
#include "kernels/qmatmul.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

using base::f16_at;
using kernels::unpack6x8;

inline float bf16_value(const uint8_t* p, int64_t i) {
  uint16_t b;
  std::memcpy(&b, p + 2 * i, 2);
  return base::bf16_to_f32(b);
}

inline float f32_value(const uint8_t* p, int64_t i) {
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}

// half(a * b): the product rounded to fp16 and widened back.
inline float half_product(float a, float b) {
  return base::round_to_half(a * b);
}

inline int plane_bit(const uint8_t* plane_row, int64_t c) {
  return (plane_row[c >> 3] >> (c & 7)) & 1;
}

void sb6_row(const QuantTensor& t, int64_t r, float* out) {
  const int64_t in = t.cols(), nsb = in / 256;
  const uint8_t* nib = t.codes_packed->data + r * (in / 2);
  const uint8_t* qh = t.gw_qh ? t.gw_qh->data + r * (in / 8) : nullptr;
  const uint8_t* qh2 = t.gw_qh2 ? t.gw_qh2->data + r * (in / 8) : nullptr;
  for (int64_t j = 0; j < nsb; ++j) {
    const uint8_t* qsqm = t.gw_qsqm->data + (r * nsb + j) * 12;
    int qs[8], qm[8];
    unpack6x8(qsqm, qs);
    unpack6x8(qsqm + 6, qm);
    const float d = f16_at(t.gw_d->data, r * nsb + j);
    const float dm = f16_at(t.gw_dm->data, r * nsb + j);
    for (int i = 0; i < 8; ++i) {
      const float s = std::max(half_product(static_cast<float>(qs[i]), d), 1e-8f);
      const float m = half_product(static_cast<float>(qm[i] - 31), dm);
      const int64_t b = j * 8 + i;
      for (int e = 0; e < 32; ++e) {
        const int64_t c = b * 32 + e;
        const uint8_t byte = nib[b * 16 + (e & 15)];
        int q = e < 16 ? (byte & 15) : (byte >> 4);
        if (qh) q += 16 * plane_bit(qh, c);
        if (qh2) q += 32 * plane_bit(qh2, c);
        const float scaled = static_cast<float>(q) * s;
        out[c] = scaled + m;
      }
    }
  }
}

void sym_row(const QuantTensor& t, int64_t r, float* out) {
  const int64_t in = t.cols(), nb = in / 16, nsb = in / 256;
  const int8_t* qs = reinterpret_cast<const int8_t*>(t.gw_qs->data) + r * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const float d = f16_at(t.gw_d->data, r * nsb + b / 16);
    const float s = half_product(static_cast<float>(qs[b]), d);
    for (int e = 0; e < 16; ++e) {
      const int64_t c = b * 16 + e;
      int q;
      if (t.bits == 8) {
        q = reinterpret_cast<const int8_t*>(t.codes->data)[r * in + c];
      } else {
        const uint8_t byte = t.codes_packed->data[r * (in / 2) + b * 8 + (e & 7)];
        int u = e < 8 ? (byte & 15) : (byte >> 4);
        u += 16 * plane_bit(t.gw_qh->data + r * (in / 8), c);
        u += 32 * plane_bit(t.gw_qh2->data + r * (in / 8), c);
        q = u - 32;
      }
      out[c] = static_cast<float>(q) * s;
    }
  }
}

void asym_row(const QuantTensor& t, int64_t r, float* out) {
  const int64_t in = t.cols(), nb = t.n_blocks;
  const uint8_t* codes = t.codes->data + r * in;
  for (int64_t c = 0; c < in; ++c) {
    const int64_t b = c / t.gs;
    const float scale = f32_value(t.gw_scale->data, r * nb + b);
    const float mn = f32_value(t.gw_min->data, r * nb + b);
    const float scaled = static_cast<float>(codes[c]) * scale;
    out[c] = scaled + mn;
  }
}

void rtn_row(const QuantTensor& t, int64_t r, float* out) {
  const int64_t in = t.cols();
  const float scale = f16_at(t.scale->data, r);
  if (t.codes) {
    const int8_t* codes = reinterpret_cast<const int8_t*>(t.codes->data) + r * in;
    for (int64_t c = 0; c < in; ++c) out[c] = static_cast<float>(codes[c]) * scale;
  } else {
    const int64_t half = (in + 1) / 2;
    const uint8_t* p = t.codes_packed->data + r * half;
    for (int64_t c = 0; c < in; ++c) {
      const uint8_t byte = p[c < half ? c : c - half];
      const int code = (c < half ? (byte & 15) : (byte >> 4)) - 8;
      out[c] = static_cast<float>(code) * scale;
    }
  }
  if (t.outlier_indices) {
    const int64_t n = t.outlier_indices->shape[0];
    for (int64_t i = 0; i < n; ++i) {
      int32_t rc[2];
      std::memcpy(rc, t.outlier_indices->data + 8 * i, 8);
      if (rc[0] == r) out[rc[1]] = bf16_value(t.outlier_values->data, i);
    }
  }
}

void dense_row(const QuantTensor& t, int64_t r, float* out) {
  const int64_t in = t.cols();
  const io::TensorView& v = *t.dense;
  for (int64_t c = 0; c < in; ++c) {
    const int64_t i = r * in + c;
    switch (v.dtype) {
      case DType::BF16:
        out[c] = bf16_value(v.data, i);
        break;
      case DType::F16:
        out[c] = f16_at(v.data, i);
        break;
      default:
        out[c] = f32_value(v.data, i);
        break;
    }
  }
}

}  // namespace

void dequantize_rows(const QuantTensor& t, int64_t row0, int64_t n, float* out) {
  if (row0 < 0 || n < 0 || row0 + n > t.rows()) {
    throw InputError("rows [" + std::to_string(row0) + ", " + std::to_string(row0 + n) +
                     ") requested from tensor '" + t.key + "' with " + std::to_string(t.rows()) +
                     " rows");
  }
  const int64_t in = t.cols();
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + i * in;
    const int64_t r = row0 + i;
    switch (t.layout) {
      case Layout::kSb6:
        sb6_row(t, r, o);
        break;
      case Layout::kSym:
        sym_row(t, r, o);
        break;
      case Layout::kAsym:
        asym_row(t, r, o);
        break;
      case Layout::kRtn:
        rtn_row(t, r, o);
        break;
      case Layout::kDense:
        dense_row(t, r, o);
        break;
    }
  }
}

std::vector<float> dequantize(const QuantTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) dequantize_rows(t, 0, t.rows(), out.data());
  return out;
}

}  // namespace wick::quant
