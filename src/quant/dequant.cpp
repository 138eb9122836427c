// Exact dequantisation of the `.rwkvq` layouts (docs/rwkvq-format.md §2). Every rounding point is
// the spec's (sb6 and sym in kernels/qmatmul_scalar.cpp): sb6 w = q*s + m (multiply, then add: two
// roundings, the product being exact except at the 1e-8 floor), sym w = q*s (exact), asym w =
// code*scale + min (multiply-round, add-round: this file is compiled without FMA contraction, see
// src/CMakeLists.txt), rtn w = code*scale.
#include "quant/dequant.h"

#include <cstring>
#include <string>

#include "base/fp16.h"
#include "kernels/qmatmul.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

using base::f16_at;

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
        kernels::decode_rows(sb6_matrix(t), r, r + 1, o);
        break;
      case Layout::kSym:
        kernels::decode_rows(sym_matrix(t), r, r + 1, o);
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

namespace {
const uint8_t* bytes(const io::TensorView* v) {
  return v ? v->data : nullptr;
}
}  // namespace

kernels::Sb6Matrix sb6_matrix(const QuantTensor& t) {
  return kernels::Sb6Matrix{bytes(t.codes_packed),
                            bytes(t.gw_qh),
                            bytes(t.gw_qh2),
                            bytes(t.gw_qsqm),
                            bytes(t.gw_d),
                            bytes(t.gw_dm),
                            t.rows(),
                            t.cols(),
                            t.bits};
}

kernels::SymMatrix sym_matrix(const QuantTensor& t) {
  return kernels::SymMatrix{reinterpret_cast<const int8_t*>(bytes(t.codes)),
                            bytes(t.codes_packed),
                            bytes(t.gw_qh),
                            bytes(t.gw_qh2),
                            reinterpret_cast<const int8_t*>(bytes(t.gw_qs)),
                            bytes(t.gw_d),
                            t.rows(),
                            t.cols(),
                            t.bits};
}

std::vector<float> dequantize(const QuantTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) dequantize_rows(t, 0, t.rows(), out.data());
  return out;
}

}  // namespace wick::quant
