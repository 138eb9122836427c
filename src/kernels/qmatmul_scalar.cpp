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

}  // namespace

void decode_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t cols = w.cols, nsb = cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* nib = w.codes_packed + r * (cols / 2);
    const uint8_t* qh = w.bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
    const uint8_t* qh2 = w.bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
    float* o = out + (r - r0) * cols;
    for (int64_t j = 0; j < nsb; ++j) {
      int qs[8], qm[8];
      unpack6x8(w.qsqm + (r * nsb + j) * 12, qs);
      unpack6x8(w.qsqm + (r * nsb + j) * 12 + 6, qm);
      const float d = f16_at(w.d, r * nsb + j), dm = f16_at(w.dm, r * nsb + j);
      for (int i = 0; i < 8; ++i) {
        const float s = std::max(round_to_half(static_cast<float>(qs[i]) * d), 1e-8f);
        const float m = round_to_half(static_cast<float>(qm[i] - 31) * dm);
        const int64_t b = j * 8 + i;
        for (int e = 0; e < 32; ++e) {
          const int64_t c = b * 32 + e;
          const uint8_t byte = nib[b * 16 + (e & 15)];
          int q = e < 16 ? (byte & 15) : (byte >> 4);
          if (qh) q += 16 * plane_bit(qh, c);
          if (qh2) q += 32 * plane_bit(qh2, c);
          const float scaled = static_cast<float>(q) * s;
          o[c] = scaled + m;
        }
      }
    }
  }
}

void decode_rows(const SymMatrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t cols = w.cols, nsb = cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t* qs = w.qs + r * (cols / 16);
    float* o = out + (r - r0) * cols;
    for (int64_t b = 0; b < cols / 16; ++b) {
      const float s = round_to_half(static_cast<float>(qs[b]) * f16_at(w.d, r * nsb + b / 16));
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
        o[c] = static_cast<float>(q) * s;
      }
    }
  }
}

namespace qmat {

const Kernels& kernels_scalar() {
  static const Kernels k{decode_rows, decode_rows, nullptr, nullptr, "scalar"};
  return k;
}

}  // namespace qmat
}  // namespace wick::kernels
