// AVX-512 (F, BW, VL, DQ) quantised matrix kernels (kernels/qmatmul.h; only called when the CPU
// has them). The AVX2 design widened: units of 32 columns (an sb6 block; a pair of sym blocks)
// decoded to 2 x 16 floats in column order, so the inputs are used as they are. sb6@4 zero-extends
// the 16 code bytes to 16 lanes and splits the nibbles there; the other layouts assemble the 32
// codes as bytes in a ymm (nibble split undone with one shift, each bit plane added with one
// masked byte add whose mask is the plane word) and widen each half.
//
// Summation order of one output (fixed, whatever the tile of rows or inputs it is computed in):
//   sb6 superblock:  first acc[0] = fma(m[0..7] | 0, xbsum[0..7] | 0, acc[0]), then its 8 units:
//   sb6 unit i:      b = f0*x0 (mul), fma f1*x1;  acc[i % 2] = fma(b, s_i, acc[i % 2])
//   sym unit i:      acc[0] = fma(f0*x0, s_2i, acc[0]); acc[1] = fma(f1*x1, s_2i+1, acc[1])
//   end:             reduce(acc[0] + acc[1])
// All arithmetic is explicit FMA / mul / add with no mul feeding an add, so contraction by the
// compiler cannot change results between tile sizes. A single input is computed for two rows at
// once (interleaved decodes and FMA chains, two memory streams); batches take up to 8 inputs per
// decoded unit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/qmatmul_impl.h"

// GCC 12 reports the _mm512_undefined_* operands inside its own conversion and reduction
// intrinsics as (maybe) used uninitialized once they are inlined into loops (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace wick::kernels::qmat {
namespace {

constexpr int kTile = 8;  // inputs per pass over a row: 8 x (2 accumulators) of 32 zmm

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256 half_of(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, 0));
}

// Adds `value` to byte i of c for every bit i set in the 32-bit plane word at p.
inline __m256i add_plane(__m256i c, const uint8_t* p, char value) {
  return _mm256_mask_add_epi8(c, static_cast<__mmask32>(load_u32(p)), c, _mm256_set1_epi8(value));
}

// ---- sb6 -----------------------------------------------------------------------------------

template <int Bits>
struct Sb6 {
  using Matrix = Sb6Matrix;
  static constexpr bool kAffine = true;
  const uint8_t *nib, *qh, *qh2, *qsqm, *d, *dm;
  int64_t nsb;
  bool last_row;  // the 16-byte load of the last superblock's 12 scale bytes would overrun
  alignas(32) float s[8];
  __m256 m;

  void init(const Sb6Matrix& w, int64_t r) {
    const int64_t cols = w.cols;
    nsb = cols / 256;
    last_row = r == w.rows - 1;
    nib = w.codes_packed + r * (cols / 2);
    qh = Bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = Bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
    qsqm = w.qsqm + r * nsb * 12;
    d = w.d + r * nsb * 2;
    dm = w.dm + r * nsb * 2;
  }

  // s_b = max(half(qs_i d), 1e-8) (to s[]) and m_b = half(qm_i dm) for the 8 blocks.
  void superblock(int64_t j) {
    const uint8_t* p = qsqm + 12 * j;
    __m128i raw;
    if (!last_row || j + 1 < nsb) {
      raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));  // 4 bytes of the next one
    } else {
      raw = _mm_insert_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                             static_cast<int>(load_u32(p + 8)), 2);
    }
    const __m256i v = _mm256_broadcastsi128_si256(raw);
    // Lane i takes the byte(s) holding bits 6i .. 6i+5 of the 6-bit stream, then shifts.
    const __m256i qs_idx = _mm256_setr_epi8(0, -1, -1, -1, 0, 1, -1, -1,   // values 0, 1
                                            1, 2, -1, -1, 2, -1, -1, -1,   // 2, 3
                                            3, -1, -1, -1, 3, 4, -1, -1,   // 4, 5
                                            4, 5, -1, -1, 5, -1, -1, -1);  // 6, 7
    const __m256i qm_idx = _mm256_setr_epi8(6, -1, -1, -1, 6, 7, -1, -1,   // the same, 6 bytes on
                                            7, 8, -1, -1, 8, -1, -1, -1,   //
                                            9, -1, -1, -1, 9, 10, -1, -1,  //
                                            10, 11, -1, -1, 11, -1, -1, -1);
    const __m256i shifts = _mm256_setr_epi32(0, 6, 4, 2, 0, 6, 4, 2);
    const __m256i six = _mm256_set1_epi32(63);
    const __m256i qs =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, qs_idx), shifts), six);
    const __m256i qm = _mm256_sub_epi32(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, qm_idx), shifts), six),
        _mm256_set1_epi32(31));
    const __m256 dv = _mm256_set1_ps(f16_at(d + 2 * j)), dmv = _mm256_set1_ps(f16_at(dm + 2 * j));
    const __m256 sv = half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(qs), dv));
    _mm256_store_ps(s, _mm256_max_ps(sv, _mm256_set1_ps(1e-8f)));
    m = half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(qm), dmv));
  }

  // Block u as columns 0-15 (f[0]) and 16-31 (f[1]).
  void decode(int64_t u, __m512* f) const {
    if constexpr (Bits == 4) {
      // Byte j holds column j (low nibble) and j + 16 (high nibble).
      const __m512i z =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      f[0] = _mm512_cvtepi32_ps(_mm512_and_si512(z, _mm512_set1_epi32(0x0f)));
      f[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(z, 4));
      return;
    }
    const __m256i packed = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
    __m256i c =
        _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                         _mm256_set1_epi8(0x0f));
    if constexpr (Bits >= 5) c = add_plane(c, qh + 4 * u, 16);
    if constexpr (Bits >= 6) c = add_plane(c, qh2 + 4 * u, 32);
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(c)));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(c, 1)));
  }
  void accumulate(int i, const __m512* f, const __m512* x, __m512* acc) const {
    __m512 b = _mm512_mul_ps(f[0], x[0]);
    b = _mm512_fmadd_ps(f[1], x[1], b);
    acc[i % 2] = _mm512_fmadd_ps(b, _mm512_set1_ps(s[i]), acc[i % 2]);
  }
};

// ---- sym -----------------------------------------------------------------------------------

template <int Bits>
struct Sym {
  using Matrix = SymMatrix;
  static constexpr bool kAffine = false;
  const int8_t* codes;
  const uint8_t *nib, *qh, *qh2, *d;
  const int8_t* qs;
  alignas(64) float s[16];

  void init(const SymMatrix& w, int64_t r) {
    const int64_t cols = w.cols;
    codes = Bits == 8 ? w.codes + r * cols : nullptr;
    nib = Bits == 6 ? w.codes_packed + r * (cols / 2) : nullptr;
    qh = Bits == 6 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = Bits == 6 ? w.qh2 + r * (cols / 8) : nullptr;
    qs = w.qs + r * (cols / 16);
    d = w.d + r * (cols / 256) * 2;
  }

  // s_b = half(qs_b d) for the 16 blocks of superblock j.
  void superblock(int64_t j) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * j));
    const __m512 sv =
        _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                                                      _mm512_set1_ps(f16_at(d + 2 * j))),
                                        0));
    _mm512_store_ps(s, sv);
  }

  // Blocks 2u (f[0]) and 2u + 1 (f[1]), columns in order.
  void decode(int64_t u, __m512* f) const {
    __m128i lo, hi;
    if constexpr (Bits == 8) {
      lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * u));
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 32 * u + 16));
    } else {
      // 16 bytes = blocks 2u, 2u+1 of 8 bytes each (byte j: column j low, j + 8 high).
      // Qwords (0,0 | 1,1), then shift the second copy of each by 4: columns 0-15 | 16-31.
      const __m256i packed = _mm256_permute4x64_epi64(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u))),
          0x50);
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      c = add_plane(c, qh + 4 * u, 16);
      c = add_plane(c, qh2 + 4 * u, 32);
      c = _mm256_sub_epi8(c, _mm256_set1_epi8(32));
      lo = _mm256_castsi256_si128(c);
      hi = _mm256_extracti128_si256(c, 1);
    }
    f[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    f[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
  void accumulate(int i, const __m512* f, const __m512* x, __m512* acc) const {
    acc[0] = _mm512_fmadd_ps(_mm512_mul_ps(f[0], x[0]), _mm512_set1_ps(s[2 * i]), acc[0]);
    acc[1] = _mm512_fmadd_ps(_mm512_mul_ps(f[1], x[1]), _mm512_set1_ps(s[2 * i + 1]), acc[1]);
  }
};

// ---- row kernel ----------------------------------------------------------------------------

// Rows r + k * rs (k < NR) for NT inputs (px, xbsum already offset to the first input); output
// (row k, input t) goes to y[t * ys + k * rs].
template <class Fmt, int NR, int NT>
void tile(const typename Fmt::Matrix& w, int64_t r, int64_t rs, const float* px, const float* xbsum,
          float* y, int64_t ys) {
  const int64_t cols = w.cols, nsb = cols / 256, ng = cols / kGroup;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  __m512 acc[NR][NT][2];
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) acc[k][t][0] = acc[k][t][1] = _mm512_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    for (int k = 0; k < NR; ++k) {
      fmt[k].superblock(j);
      if constexpr (Fmt::kAffine) {
        const __m512 m = _mm512_zextps256_ps512(fmt[k].m);
        for (int t = 0; t < NT; ++t) {
          const __m512 xb = _mm512_zextps256_ps512(_mm256_loadu_ps(xbsum + t * ng + 8 * j));
          acc[k][t][0] = _mm512_fmadd_ps(m, xb, acc[k][t][0]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t u = 8 * j + i;
      __m512 f[NR][2];
      for (int k = 0; k < NR; ++k) fmt[k].decode(u, f[k]);
      for (int t = 0; t < NT; ++t) {
        const float* xp = px + t * cols + kGroup * u;
        const __m512 x[2] = {_mm512_loadu_ps(xp), _mm512_loadu_ps(xp + 16)};
        for (int k = 0; k < NR; ++k) fmt[k].accumulate(i, f[k], x, acc[k][t]);
      }
    }
  }
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t)
      y[t * ys + k * rs] = _mm512_reduce_add_ps(_mm512_add_ps(acc[k][t][0], acc[k][t][1]));
}

template <class Fmt>
void rows(const typename Fmt::Matrix& w, int64_t r0, int64_t r1, const float* px,
          const float* xbsum, int64_t nt, float* y, int64_t ys) {
  const int64_t cols = w.cols, ng = cols / kGroup;
  // Inputs outermost: a tile's inputs stay in L1 while the item's rows stream past them.
  for (int64_t t = 0; t < nt; t += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, nt - t));
    const float* p = px + t * cols;
    const float* xb = xbsum ? xbsum + t * ng : nullptr;
    float* o = y + t * ys - r0;
    int64_t r = r0;
    switch (n) {
      case 8:
        for (; r < r1; ++r) tile<Fmt, 1, 8>(w, r, 0, p, xb, o + r, ys);
        break;
      case 7:
        for (; r < r1; ++r) tile<Fmt, 1, 7>(w, r, 0, p, xb, o + r, ys);
        break;
      case 6:
        for (; r < r1; ++r) tile<Fmt, 1, 6>(w, r, 0, p, xb, o + r, ys);
        break;
      case 5:
        for (; r < r1; ++r) tile<Fmt, 1, 5>(w, r, 0, p, xb, o + r, ys);
        break;
      case 4:
        for (; r < r1; ++r) tile<Fmt, 1, 4>(w, r, 0, p, xb, o + r, ys);
        break;
      case 3:
        for (; r < r1; ++r) tile<Fmt, 1, 3>(w, r, 0, p, xb, o + r, ys);
        break;
      case 2:
        for (; r < r1; ++r) tile<Fmt, 1, 2>(w, r, 0, p, xb, o + r, ys);
        break;
      default: {
        // A single input: two rows at a time, from the two halves of the item (interleaved
        // decodes and FMA chains; two memory streams).
        const int64_t h = (r1 - r0) / 2;
        for (int64_t i = 0; i < h; ++i) tile<Fmt, 2, 1>(w, r0 + i, h, p, xb, o + r0 + i, ys);
        if (r0 + 2 * h < r1) tile<Fmt, 1, 1>(w, r1 - 1, 0, p, xb, o + r1 - 1, ys);
        break;
      }
    }
  }
}

void sb6_rows(const Sb6Matrix& w, int64_t r0, int64_t r1, const float* px, const float* xbsum,
              int64_t nt, float* y, int64_t ys) {
  switch (w.bits) {
    case 4:
      return rows<Sb6<4>>(w, r0, r1, px, xbsum, nt, y, ys);
    case 5:
      return rows<Sb6<5>>(w, r0, r1, px, xbsum, nt, y, ys);
    default:
      return rows<Sb6<6>>(w, r0, r1, px, xbsum, nt, y, ys);
  }
}

void sym_rows(const SymMatrix& w, int64_t r0, int64_t r1, const float* px, int64_t nt, float* y,
              int64_t ys) {
  if (w.bits == 8) return rows<Sym<8>>(w, r0, r1, px, nullptr, nt, y, ys);
  return rows<Sym<6>>(w, r0, r1, px, nullptr, nt, y, ys);
}

// Inputs are used in column order (px unused); xbsum = reduce(x[0..15] + x[16..31]).
const float* prepare_sb6(const Sb6Matrix& w, const float* x, int64_t T, float* px, float* xbsum) {
  const int64_t n = T * (w.cols / kGroup);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = x + i * kGroup;
    xbsum[i] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)));
  }
  return x;
}

const float* prepare_sym(const SymMatrix& w, const float* x, int64_t T, float* px) {
  return x;
}

}  // namespace

const Kernels& kernels_avx512() {
  static const Kernels k{prepare_sb6, prepare_sym, sb6_rows, sym_rows, kTile};
  return k;
}

}  // namespace wick::kernels::qmat
