// Portable quantised matrix kernels (kernels/qmatmul.h): the reference the SIMD versions are
// tested against and the fallback on CPUs without AVX2. Written for clarity: one (row, input) pair
// at a time, the block-factorised sums of docs/rwkvq-format.md §2.8 in column order, the scales
// decoded exactly as §2.2 / §2.3 define them.
#include <algorithm>
#include <cstring>

#include "base/fp16.h"
#include "kernels/dot.h"
#include "kernels/qmatmul_impl.h"

namespace wick::kernels::qmat {

using base::f16_at;
using base::round_to_half;
namespace {

inline int plane_bit(const uint8_t* plane, int64_t c) {
  return (plane[c >> 3] >> (c & 7)) & 1;
}

// Inputs in column order; xbsum in column order.
const float* prepare_sb6(const Sb6Matrix& w, const float* x, int64_t T, float* px, float* xbsum) {
  const int64_t cols = w.cols, ng = cols / kGroup;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < ng; ++g) {
      const float* p = x + t * cols + g * kGroup;
      float s = 0;
      for (int c = 0; c < kGroup; ++c) s += p[c];
      xbsum[t * ng + g] = s;
    }
  return x;
}

const float* prepare_sym(const SymMatrix& w, const float* x, int64_t T, float* px) {
  return x;
}

float sb6_dot(const Sb6Matrix& w, int64_t r, const float* x, const float* xbsum) {
  const int64_t cols = w.cols, nsb = cols / 256;
  const uint8_t* nib = w.codes_packed + r * (cols / 2);
  const uint8_t* qh = w.bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
  const uint8_t* qh2 = w.bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
  float acc = 0;
  for (int64_t j = 0; j < nsb; ++j) {
    int qs[8], qm[8];
    unpack6x8(w.qsqm + (r * nsb + j) * 12, qs);
    unpack6x8(w.qsqm + (r * nsb + j) * 12 + 6, qm);
    const float d = f16_at(w.d, r * nsb + j), dm = f16_at(w.dm, r * nsb + j);
    float acc_sb = 0;
    for (int i = 0; i < 8; ++i) {
      const float s = std::max(round_to_half(static_cast<float>(qs[i]) * d), 1e-8f);
      const float m = round_to_half(static_cast<float>(qm[i] - 31) * dm);
      const int64_t b = j * 8 + i;
      float dot = 0;
      for (int e = 0; e < 32; ++e) {
        const int64_t c = b * 32 + e;
        const uint8_t byte = nib[b * 16 + (e & 15)];
        int q = e < 16 ? (byte & 15) : (byte >> 4);
        if (qh) q += 16 * plane_bit(qh, c);
        if (qh2) q += 32 * plane_bit(qh2, c);
        dot += static_cast<float>(q) * x[c];
      }
      acc_sb += s * dot + m * xbsum[b];
    }
    acc += acc_sb;
  }
  return acc;
}

float sym_dot(const SymMatrix& w, int64_t r, const float* x) {
  const int64_t cols = w.cols, nsb = cols / 256;
  const int8_t* qs = w.qs + r * (cols / 16);
  float acc = 0;
  for (int64_t j = 0; j < nsb; ++j) {
    const float d = f16_at(w.d, r * nsb + j);
    float acc_sb = 0;
    for (int i = 0; i < 16; ++i) {
      const int64_t b = j * 16 + i;
      const float s = round_to_half(static_cast<float>(qs[b]) * d);
      float dot = 0;
      for (int e = 0; e < 16; ++e) {
        const int64_t c = b * 16 + e;
        int q;
        if (w.bits == 8) {
          q = w.codes[r * cols + c];
        } else {
          const uint8_t byte = w.codes_packed[r * (cols / 2) + b * 8 + (e & 7)];
          const int u = (e < 8 ? (byte & 15) : (byte >> 4)) +
                        16 * plane_bit(w.qh + r * (cols / 8), c) +
                        32 * plane_bit(w.qh2 + r * (cols / 8), c);
          q = u - 32;
        }
        dot += static_cast<float>(q) * x[c];
      }
      acc_sb += s * dot;
    }
    acc += acc_sb;
  }
  return acc;
}

void sb6_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* px, const float* xbsum,
              int64_t nt, float* y, int64_t ys) {
  const int64_t ng = w.cols / kGroup;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = r0; r < r1; ++r)
      y[t * ys + (r - r0)] = sb6_dot(w, r, px + t * w.cols, xbsum + t * ng);
}

void sym_rows(const SymMatrix& w, int64_t r0, int64_t r1, const float* px, int64_t nt, float* y,
              int64_t ys) {
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = r0; r < r1; ++r) y[t * ys + (r - r0)] = sym_dot(w, r, px + t * w.cols);
}

}  // namespace

const Kernels& kernels_scalar() {
  static const Kernels k{prepare_sb6, prepare_sym, sb6_rows, sym_rows, /*tile_inputs=*/1, "scalar"};
  return k;
}

}  // namespace wick::kernels::qmat
