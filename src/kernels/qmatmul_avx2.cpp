// AVX2 + FMA + F16C quantised matrix kernels (kernels/qmatmul.h; only called when the CPU has
// them).
//
// Work is done in units of 32 columns (an sb6 block; a pair of sym blocks). A unit's codes become
// 4 x 8 floats f[0..3] in one of two column orders, and the inputs are read in the same order:
//  * column order (sb6@4, sym@8): f[k] = columns 8k .. 8k+7 (sb6@4 after undoing the nibble split:
//    f = columns 0-7, 8-15, 16-23, 24-31 from zero-extended bytes 0-7 and 8-15);
//  * "byte-lane" order (sb6@5/6, sym@6): the codes are first assembled as 32 bytes in one ymm
//    (nibble split undone with one shift for both halves, bit planes added with a byte shuffle +
//    compare each), then split into 32-bit lanes with shifts and masks: f[g] lane L = byte 4L + g.
//    That costs no shuffles; the inputs are reordered to match once per call (px[8g + L] = x[the
//    column of byte 4L + g] within each group of 32 columns). sb6 bytes are in column order; sym@6
//    bytes 0-7 | 8-15 | 16-23 | 24-31 hold columns 0-7 | 16-23 | 8-15 | 24-31 (its gs-16 nibble
//    split), so lanes 0, 1, 4, 5 hold block 2i and lanes 2, 3, 6, 7 block 2i+1: the unit's two
//    block scales form one vector.
// The order is chosen per format (prepare_sb6 / prepare_sym look at the matrix).
//
// Summation order of one output (fixed, whatever the tile of rows or inputs it is computed in):
//   sb6 superblock: first acc[0] = fma(m[0..7], xbsum[0..7], acc[0]), then its 8 units:
//   sb6 unit i:     b = f0*x0 (mul), fma f1*x1, f2*x2, f3*x3;  acc[i%2] = fma(b, s_i, acc[i%2])
//   sym@6 unit i:   the same b;  acc[i%2] = fma(b, (each lane's block scale), acc[i%2])
//   sym@8 unit i:   b0 = f0*x0 + f1*x1 (mul, fma), b1 = f2*x2 + f3*x3;
//                   acc[0] = fma(b0, s_2i, acc[0]); acc[1] = fma(b1, s_2i+1, acc[1])
//   end:            hsum(acc[0] + acc[1])
// Two accumulators keep the chain of dependent FMAs per output short; each (row, input) pair has
// its own. All arithmetic is explicit FMA / mul / add with no mul feeding an add, so contraction
// by the compiler cannot change results between tile sizes.
//
// Register blocking: a single input is computed for two rows at once (their decodes and FMA
// chains interleave, which the out-of-order core needs to hide the latency of decode + FMA chain,
// and the rows come from the two halves of the work item: two memory streams); batches take 4
// inputs per decoded unit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/hsum_avx2.h"
#include "kernels/qmatmul_impl.h"

namespace wick::kernels::qmat {
namespace {

constexpr int kTile = 4;  // inputs per decoded unit: 4 x 2 accumulators + 4 decoded vectors

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

// half(v) per lane: round to fp16 (nearest even, subnormals kept) and widen back.
inline __m256 half_of(__m256 v) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, 0));
}

// 0xff in byte i of the result where the plane word at p has the bit of byte i's column set.
// Byte i holds column i (Sym6 = false) or sym@6's column order below (Sym6 = true); either way the
// bit is i % 8 of one byte of the word.
template <bool Sym6 = false>
inline __m256i plane_mask(const uint8_t* p) {
  // byte i <- the word's byte holding its column, then test bit i % 8.
  const __m256i spread = Sym6 ? _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                                 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3)
                              : _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load_u32(p))), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

// 32 bytes -> 4 x 8 floats in byte-lane order (f[g] lane L = byte 4L + g), unsigned / signed.
inline void unsigned_bytes_to_f32(__m256i c, __m256* f) {
  const __m256i low = _mm256_set1_epi32(0xff);
  f[0] = _mm256_cvtepi32_ps(_mm256_and_si256(c, low));
  f[1] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(c, 8), low));
  f[2] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(c, 16), low));
  f[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(c, 24));
}
inline void signed_bytes_to_f32(__m256i c, __m256* f) {
  f[0] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 24), 24));
  f[1] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 16), 24));
  f[2] = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 8), 24));
  f[3] = _mm256_cvtepi32_ps(_mm256_srai_epi32(c, 24));
}

// b = f0*x0 + f1*x1 + f2*x2 + f3*x3 as one chain (the block partial of a unit).
inline __m256 unit_dot(const __m256* f, const __m256* x) {
  __m256 b = _mm256_mul_ps(f[0], x[0]);
  b = _mm256_fmadd_ps(f[1], x[1], b);
  b = _mm256_fmadd_ps(f[2], x[2], b);
  return _mm256_fmadd_ps(f[3], x[3], b);
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
    nib = w.codes_packed + r * (cols / 2);
    qh = Bits >= 5 ? w.qh + r * (cols / 8) : nullptr;
    qh2 = Bits >= 6 ? w.qh2 + r * (cols / 8) : nullptr;
    qsqm = w.qsqm + r * nsb * 12;
    d = w.d + r * nsb * 2;
    dm = w.dm + r * nsb * 2;
    last_row = r == w.rows - 1;
  }

  // The 8 block scales s_b = max(half(qs_i d), 1e-8) (to s[]) and offsets m_b = half(qm_i dm).
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

  void decode(int64_t u, __m256* f) const {
    const uint8_t* p = nib + 16 * u;
    if constexpr (Bits == 4) {
      // Byte j holds column j (low nibble) and j + 16 (high nibble).
      const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      const __m256i b =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
      const __m256i low = _mm256_set1_epi32(0x0f);
      f[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, low));
      f[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
      f[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
      f[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
    } else {
      const __m256i packed =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      // Low lane: low nibbles (columns 0-15); high lane: high nibbles (columns 16-31).
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask(qh + 4 * u), _mm256_set1_epi8(16)));
      if constexpr (Bits >= 6)
        c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask(qh2 + 4 * u), _mm256_set1_epi8(32)));
      unsigned_bytes_to_f32(c, f);
    }
  }

  void accumulate(int i, const __m256* f, const __m256* x, __m256* acc) const {
    const __m256 b = unit_dot(f, x);
    acc[i % 2] = _mm256_fmadd_ps(b, _mm256_broadcast_ss(s + i), acc[i % 2]);
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
  // sym@8: s_b per block of the superblock; sym@6: per unit, the scale of each lane's block.
  alignas(32) float s[Bits == 8 ? 16 : 64];

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
    const __m256 dv = _mm256_set1_ps(f16_at(d + 2 * j));
    const __m256 lo = half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv));
    const __m256 hi =
        half_of(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), dv));
    if constexpr (Bits == 8) {
      _mm256_store_ps(s, lo);
      _mm256_store_ps(s + 8, hi);
    } else {
      for (int p = 0; p < 4; ++p) {
        const __m256i idx = _mm256_setr_epi32(2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p, 2 * p,
                                              2 * p + 1, 2 * p + 1);
        _mm256_store_ps(s + 8 * p, _mm256_permutevar8x32_ps(lo, idx));
        _mm256_store_ps(s + 8 * (p + 4), _mm256_permutevar8x32_ps(hi, idx));
      }
    }
  }

  void decode(int64_t u, __m256* f) const {
    if constexpr (Bits == 8) {
      const int8_t* p = codes + 32 * u;
      for (int k = 0; k < 4; ++k)
        f[k] = _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * k))));
    } else {
      // 16 bytes = blocks 2u, 2u+1 of 8 bytes each (byte j: column j low, j + 8 high). Low
      // nibbles in the low lane, high nibbles in the high lane: bytes 0-7 | 8-15 | 16-23 | 24-31
      // hold columns 0-7 | 16-23 | 8-15 | 24-31 (see sym6_column).
      const __m256i packed = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(nib + 16 * u)));
      __m256i c =
          _mm256_and_si256(_mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                           _mm256_set1_epi8(0x0f));
      // q = nibble + 16 qh + 32 qh2 - 32: add 16 where qh is set, -32 where qh2 is clear.
      c = _mm256_add_epi8(c, _mm256_and_si256(plane_mask<true>(qh + 4 * u), _mm256_set1_epi8(16)));
      c = _mm256_add_epi8(
          c, _mm256_andnot_si256(plane_mask<true>(qh2 + 4 * u), _mm256_set1_epi8(-32)));
      signed_bytes_to_f32(c, f);
    }
  }

  void accumulate(int i, const __m256* f, const __m256* x, __m256* acc) const {
    if constexpr (Bits == 8) {
      __m256 b0 = _mm256_mul_ps(f[0], x[0]);
      b0 = _mm256_fmadd_ps(f[1], x[1], b0);
      __m256 b1 = _mm256_mul_ps(f[2], x[2]);
      b1 = _mm256_fmadd_ps(f[3], x[3], b1);
      acc[0] = _mm256_fmadd_ps(b0, _mm256_broadcast_ss(s + 2 * i), acc[0]);
      acc[1] = _mm256_fmadd_ps(b1, _mm256_broadcast_ss(s + 2 * i + 1), acc[1]);
    } else {
      const __m256 b = unit_dot(f, x);
      acc[i % 2] = _mm256_fmadd_ps(b, _mm256_load_ps(s + 8 * i), acc[i % 2]);
    }
  }
};

// ---- row kernels ---------------------------------------------------------------------------

// Rows r + k * rs (k < NR) for NT inputs (px, xbsum already offset to the first input); output
// (row k, input t) goes to y[t * ys + k * rs].
template <class Fmt, int NR, int NT>
void tile(const typename Fmt::Matrix& w, int64_t r, int64_t rs, const float* px, const float* xbsum,
          float* y, int64_t ys) {
  const int64_t cols = w.cols, nsb = cols / 256, ng = cols / kGroup;
  Fmt fmt[NR];
  for (int k = 0; k < NR; ++k) fmt[k].init(w, r + k * rs);
  __m256 acc[NR][NT][2];
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t) acc[k][t][0] = acc[k][t][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < nsb; ++j) {
    for (int k = 0; k < NR; ++k) {
      fmt[k].superblock(j);
      if constexpr (Fmt::kAffine) {
        for (int t = 0; t < NT; ++t)
          acc[k][t][0] =
              _mm256_fmadd_ps(fmt[k].m, _mm256_loadu_ps(xbsum + t * ng + 8 * j), acc[k][t][0]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int64_t u = 8 * j + i;
      __m256 f[NR][4];
      for (int k = 0; k < NR; ++k) fmt[k].decode(u, f[k]);
      for (int t = 0; t < NT; ++t) {
        const float* xp = px + t * cols + kGroup * u;
        const __m256 x[4] = {_mm256_loadu_ps(xp), _mm256_loadu_ps(xp + 8), _mm256_loadu_ps(xp + 16),
                             _mm256_loadu_ps(xp + 24)};
        for (int k = 0; k < NR; ++k) fmt[k].accumulate(i, f[k], x, acc[k][t]);
      }
    }
  }
  for (int k = 0; k < NR; ++k)
    for (int t = 0; t < NT; ++t)
      y[t * ys + k * rs] = hsum(_mm256_add_ps(acc[k][t][0], acc[k][t][1]));
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
        // A single input: two rows at a time, from the two halves of the item. Their decodes and
        // FMA chains interleave, and the two code streams double the memory-level parallelism of
        // a single sequential stream (the bandwidth-bound layouts stream ~2x faster).
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

// ---- input preparation ---------------------------------------------------------------------

// Column of byte p of a decoded sym@6 unit (see Sym<6>::decode).
constexpr int sym6_column(int p) {
  return p < 8 || p >= 24 ? p : p < 16 ? p + 8 : p - 8;
}

// Each group of 32 inputs in byte-lane order: px[8g + L] = x[column(4L + g)] (an 8 x 4 transpose,
// with sym@6's byte order when Sym6).
template <bool Sym6>
void to_byte_lane_order(const float* x, int64_t n, float* px) {
  for (int64_t base = 0; base < n; base += kGroup)
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 8; ++l)
        px[base + 8 * g + l] = x[base + (Sym6 ? sym6_column(4 * l + g) : 4 * l + g)];
}

const float* prepare_sb6(const Sb6Matrix& w, const float* x, int64_t T, float* px, float* xbsum) {
  const int64_t cols = w.cols, ng = cols / kGroup;
  const bool column_order = w.bits == 4;
  if (!column_order) to_byte_lane_order<false>(x, T * cols, px);
  const float* in = column_order ? x : px;
  // Block sums: the group's four 8-vectors added pairwise, then hsum.
  for (int64_t i = 0; i < T * ng; ++i) {
    const float* p = in + i * kGroup;
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
    const __m256 b = _mm256_add_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24));
    xbsum[i] = hsum(_mm256_add_ps(a, b));
  }
  return in;
}

const float* prepare_sym(const SymMatrix& w, const float* x, int64_t T, float* px) {
  if (w.bits == 8) return x;
  to_byte_lane_order<true>(x, T * w.cols, px);
  return px;
}

}  // namespace

const Kernels& kernels_avx2() {
  static const Kernels k{prepare_sb6, prepare_sym, sb6_rows, sym_rows, kTile};
  return k;
}

}  // namespace wick::kernels::qmat
