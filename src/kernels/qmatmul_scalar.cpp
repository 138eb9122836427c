// Portable decoders of the quantised matrices (kernels/qmatmul.h decode_rows,
// kernels/qmatmul_impl.h): the reference the dequantiser calls and the SIMD decoders are tested
// against, and the fallback on CPUs without AVX2. Written for clarity, one
// weight at a time, the scales decoded exactly as docs/rwkvq-format.md §2.2 / §2.3 define them
// (sb6 q * s + m, multiplied then added: this file is compiled with -ffp-contract=off).
#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/qmatmul_impl.h"

namespace wick::kernels {

using base::f16_at;
using base::round_to_half;
namespace {

inline int plane_bit(const uint8_t* plane, int64_t c) {
  return (plane[c >> 3] >> (c & 7)) & 1;
}

// sb6 code of column c of a row (its nibble stream and bit planes, null below 5 / 6 bits).
inline int sb6_code(const uint8_t* nib, const uint8_t* qh, const uint8_t* qh2, int64_t c) {
  const int64_t b = c / 32, e = c % 32;
  const uint8_t byte = nib[b * 16 + (e & 15)];
  int q = e < 16 ? (byte & 15) : (byte >> 4);
  if (qh) q += 16 * plane_bit(qh, c);
  if (qh2) q += 32 * plane_bit(qh2, c);
  return q;
}

// The fp16 bits of half(qs_b d) (before the floor) and of m_b = half(qm_b dm) for the 8 blocks of
// superblock j of row r: the one reading of the 6-bit fields (unpack_sb6_scales stores these).
inline void sb6_scale_halves(const Sb6Matrix& w, int64_t r, int64_t j, uint16_t* s, uint16_t* m) {
  const int64_t nsb = w.cols / 256;
  int qs[8], qm[8];
  unpack6x8(w.qsqm + (r * nsb + j) * 12, qs);
  unpack6x8(w.qsqm + (r * nsb + j) * 12 + 6, qm);
  const float d = f16_at(w.d, r * nsb + j), dm = f16_at(w.dm, r * nsb + j);
  for (int i = 0; i < 8; ++i) {
    s[i] = base::f32_to_f16(static_cast<float>(qs[i]) * d);
    m[i] = base::f32_to_f16(static_cast<float>(qm[i] - 31) * dm);
  }
}

// The scales s_b = max(half(qs_b d), 1e-8), m_b of the 8 blocks of superblock j of row r.
inline void sb6_scales(const Sb6Matrix& w, int64_t r, int64_t j, float* s, float* m) {
  uint16_t hs[8], hm[8];
  sb6_scale_halves(w, r, j, hs, hm);
  for (int i = 0; i < 8; ++i) {
    s[i] = std::max(base::f16_to_f32(hs[i]), 1e-8f);
    m[i] = base::f16_to_f32(hm[i]);
  }
}

// sym code q of column c of row r (-128..127 at 8 bits; u - 32 at 6, u = nibble + 16 qh + 32 qh2
// with the gs-16 nibble split: byte e of a block holds columns e and e + 8).
inline int sym_code(const SymMatrix& w, int64_t r, int64_t c) {
  const int64_t cols = w.cols;
  if (w.bits == 8) return w.codes[r * cols + c];
  const int64_t b = c / 16, e = c % 16;
  const uint8_t byte = w.codes_packed[r * (cols / 2) + b * 8 + (e & 7)];
  const int u = (e < 8 ? (byte & 15) : (byte >> 4)) + 16 * plane_bit(w.qh + r * (cols / 8), c) +
                32 * plane_bit(w.qh2 + r * (cols / 8), c);
  return u - 32;
}

// The scale s_b = half(qs_b d_j) of block b of row r.
inline float sym_scale(const SymMatrix& w, int64_t r, int64_t b) {
  const int64_t nsb = w.cols / 256;
  return round_to_half(static_cast<float>(w.qs[r * (w.cols / 16) + b]) *
                       f16_at(w.d, r * nsb + b / 16));
}

struct Sb6Row {
  const uint8_t *nib, *qh, *qh2;
  Sb6Row(const Sb6Matrix& w, int64_t r)
      : nib(w.codes_packed + r * (w.cols / 2)),
        qh(w.bits >= 5 ? w.qh + r * (w.cols / 8) : nullptr),
        qh2(w.bits >= 6 ? w.qh2 + r * (w.cols / 8) : nullptr) {}
  int code(int64_t c) const { return sb6_code(nib, qh, qh2, c); }
};

// Rows [r0, r1) x columns [c0, c1) (whole superblocks; qmat::Kernels::decode_sb6).
void decode_block(const Sb6Matrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  for (int64_t r = r0; r < r1; ++r) {
    const Sb6Row row(w, r);
    float* o = out + (r - r0) * (c1 - c0);  // column c at o[c - c0]
    for (int64_t j = c0 / 256; j < c1 / 256; ++j) {
      float s[8], m[8];
      sb6_scales(w, r, j, s, m);
      for (int64_t c = 256 * j; c < 256 * (j + 1); ++c) {
        const int i = static_cast<int>((c / 32) % 8);
        const float scaled = static_cast<float>(row.code(c)) * s[i];
        o[c - c0] = scaled + m[i];
      }
    }
  }
}
void decode_block(const SymMatrix& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  for (int64_t r = r0; r < r1; ++r) {
    float* o = out + (r - r0) * (c1 - c0);
    for (int64_t b = c0 / 16; b < c1 / 16; ++b) {
      const float s = sym_scale(w, r, b);
      for (int64_t c = b * 16; c < b * 16 + 16; ++c)
        o[c - c0] = static_cast<float>(sym_code(w, r, c)) * s;
    }
  }
}

}  // namespace

void decode_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, float* out) {
  decode_block(w, r0, r1, 0, w.cols, out);
}

void decode_rows(const SymMatrix& w, int64_t r0, int64_t r1, float* out) {
  decode_block(w, r0, r1, 0, w.cols, out);
}

namespace qmat {

namespace {
void unpack_sb6_scales_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, uint16_t* out) {
  const int64_t nsb = w.cols / 256;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < nsb; ++j) {
      uint16_t* o = out + ((r - r0) * nsb + j) * 16;
      sb6_scale_halves(w, r, j, o, o + 8);
    }
}

// The rearranged planes of rows [r0, r1) (kernels/qmatmul.h repack_sb6_high_bits,
// repack_sym6_high_bits), `bits` 5 or 6, into out[(r - r0) * cols / 256 * 32 (bits - 4) ...]:
// column c of superblock j sits at byte i of code vector v where at(c) = {v, i} says, and its
// plane bits (qh; qh2 at 6 bits) go to bit v of byte i (5 bits) or to the crumb at bits 2 (v % 4)
// of byte 32 (v / 4) + i (6 bits).
template <class At>
void repack_high_bits_rows(const uint8_t* qh, const uint8_t* qh2, int64_t cols, int bits,
                           int64_t r0, int64_t r1, uint8_t* out, At at) {
  const int64_t nsb = cols / 256, per = 32 * (bits - 4);
  std::fill(out, out + (r1 - r0) * nsb * per, uint8_t{0});
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < nsb; ++j) {
      uint8_t* o = out + ((r - r0) * nsb + j) * per;
      for (int c = 0; c < 256; ++c) {
        const auto [v, i] = at(c);
        const int64_t col = r * cols + 256 * j + c;
        const int bit = (qh[col / 8] >> (col % 8)) & 1;
        if (bits == 5) {
          o[i] = static_cast<uint8_t>(o[i] | bit << v);
        } else {
          const int bit2 = (qh2[col / 8] >> (col % 8)) & 1;
          uint8_t& dst = o[32 * (v / 4) + i];
          dst = static_cast<uint8_t>(dst | (bit | bit2 << 1) << 2 * (v % 4));
        }
      }
    }
}

struct VectorByte {
  int v, i;
};

void repack_sb6_high_bits_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, uint8_t* out) {
  // Column c is column c % 32 of block b = c / 32; vector 2 (b / 2) + its half holds it.
  repack_high_bits_rows(w.qh, w.qh2, w.cols, w.bits, r0, r1, out, [](int c) {
    const int b = c / 32;
    return VectorByte{2 * (b / 2) + (c % 32) / 16, 16 * (b % 2) + c % 16};
  });
}

void repack_sym6_high_bits_rows(const SymMatrix& w, int64_t r0, int64_t r1, uint8_t* out) {
  // The nibble layout's order: group c / 64, half (c % 16) / 8, byte 8 (block in group) + c % 8.
  repack_high_bits_rows(w.qh, w.qh2, w.cols, 6, r0, r1, out, [](int c) {
    return VectorByte{2 * (c / 64) + (c % 16) / 8, 8 * ((c % 64) / 16) + c % 8};
  });
}
}  // namespace

const Kernels& kernels_scalar() {
  static const Kernels k{decode_block,
                         decode_block,
                         nullptr,
                         nullptr,
                         unpack_sb6_scales_rows,
                         repack_sb6_high_bits_rows,
                         repack_sym6_high_bits_rows,
                         "scalar"};
  return k;
}

namespace {

// The definition of kernels/qmatmul.h qmatmul_int8_inputs for row r: x_code(c) the input's code
// of column c, sums its block sums, scales its superblock scales.
template <class XCode>
float int8_output(const Sb6Matrix& w, int64_t r, XCode x_code, const float* sums,
                  const float* scales) {
  const int64_t nsb = w.cols / 256;
  const Sb6Row row(w, r);
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < nsb; ++j) {
    float s[8], m[8];
    sb6_scales(w, r, j, s, m);
    for (int i = 0; i < 8; ++i) {
      const int64_t b = 8 * j + i;
      int32_t sum = 0;
      for (int64_t c = 32 * b; c < 32 * b + 32; ++c) sum += row.code(c) * x_code(c);
      const float t = static_cast<float>(sum) * s[i] + sums[b] * m[i];
      a[i] = a[i] + t * scales[j];
    }
  }
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

void int8_sb6(const Sb6Matrix& w, int64_t r0, int64_t r1, const Sb6Int8Input* x, int n, float* y,
              int64_t yi) {
  for (int u = 0; u < n; ++u)
    for (int64_t r = r0; r < r1; ++r)
      y[u * yi + (r - r0)] = int8_output(
          w, r, [&](int64_t c) { return x[u].codes[sb6_order(c)]; }, x[u].block_sums, x[u].scales);
}

void int8_tile(const Sb6Matrix& w, int64_t r0, int64_t r1, const Int8Inputs& x, const float* sums,
               float* y, int64_t ys, Arena&) {
  const int64_t cols = w.cols, nb = cols / 32, nsb = cols / 256;
  for (int64_t t = 0; t < x.T; ++t) {
    const int8_t* xc = x.codes + t * cols;
    for (int64_t r = r0; r < r1; ++r)
      y[t * ys + (r - r0)] = int8_output(
          w, r, [&](int64_t c) { return xc[c]; }, sums + t * nb, x.scales + t * nsb);
  }
}

// The definition of kernels/qmatmul.h qmatmul_int8_inputs for a sym matrix, row by row.
void int8_sym(const SymMatrix& w, int64_t r0, int64_t r1, const SymInt8Input& x, float* y) {
  const int8_t* codes = x.codes;
  const float* scales = x.scales;
  const int64_t nsb = w.cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < nsb; ++j)
      for (int i = 0; i < 16; ++i) {
        const int64_t b = 16 * j + i;
        int32_t sum = 0;
        for (int64_t c = 16 * b; c < 16 * b + 16; ++c) sum += sym_code(w, r, c) * codes[c];
        a[i % 8] = a[i % 8] + (static_cast<float>(sum) * sym_scale(w, r, b)) * scales[j];
      }
    y[r - r0] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
  }
}

void int8_sym_tile(const SymMatrix& w, int64_t r0, int64_t r1, const Int8Inputs& x, const int32_t*,
                   float* y, int64_t ys, Arena&) {
  const int64_t cols = w.cols, nsb = cols / 256;
  for (int64_t t = 0; t < x.T; ++t)
    int8_sym(w, r0, r1, SymInt8Input{x.codes + t * cols, nullptr, nullptr, x.scales + t * nsb},
             y + t * ys);
}

}  // namespace

const Int8InputKernels& int8_input_kernels_scalar() {
  static const Int8InputKernels k{int8_sb6, int8_tile, int8_sym, int8_sym_tile,
                                  1,        false,     false,    "scalar"};
  return k;
}

}  // namespace qmat
}  // namespace wick::kernels
