#include "kernels/panels.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "base/check.h"
#include "kernels/dot.h"
#include "kernels/thread_pool.h"
#include "kernels/work_items.h"

namespace wick::kernels {
namespace {

constexpr size_t kP = static_cast<size_t>(kPanelRows);

#if defined(__SSE2__)
// Squares of the transposition in SSE2 (every x86-64 CPU has it): G rows x G columns, G = 16 bytes
// / element size, from rows row[0 .. G) at column k into dst[j * kP + i] = row[i][k + j].
inline void transpose_square(const uint16_t* const* row, size_t k, uint16_t* dst) {
  __m128i a[8], b[8], c[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[i] + k));
  for (int i = 0; i < 4; ++i) {  // rows 2i and 2i + 1 side by side: columns 0-3, then 4-7
    b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h)  // rows 4h .. 4h + 3: columns {0,1}, {2,3}, {4,5}, {6,7}
    for (int q = 0; q < 2; ++q) {
      c[4 * h + 2 * q] = _mm_unpacklo_epi32(b[4 * h + q], b[4 * h + 2 + q]);
      c[4 * h + 2 * q + 1] = _mm_unpackhi_epi32(b[4 * h + q], b[4 * h + 2 + q]);
    }
  for (int j = 0; j < 4; ++j) {  // columns 2j and 2j + 1, all 8 rows
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * j) * kP),
                     _mm_unpacklo_epi64(c[j], c[4 + j]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * j + 1) * kP),
                     _mm_unpackhi_epi64(c[j], c[4 + j]));
  }
}
// (fp32: column j at dst + j * col_stride, kP for a k-major panel.)
inline void transpose_square(const float* const* row, size_t k, float* dst,
                             size_t col_stride = kP) {
  __m128 r0 = _mm_loadu_ps(row[0] + k), r1 = _mm_loadu_ps(row[1] + k);
  __m128 r2 = _mm_loadu_ps(row[2] + k), r3 = _mm_loadu_ps(row[3] + k);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + col_stride, r1);
  _mm_storeu_ps(dst + 2 * col_stride, r2);
  _mm_storeu_ps(dst + 3 * col_stride, r3);
}
// 4 rows x 4 pairs of columns of bf16 into the pairs layout: from rows row[0 .. 4) at column k
// (even), dst[q * 32 + 2 i + h] = row[i][k + 2 q + h] - a 4 x 4 transposition of 32-bit pairs.
inline void transpose_pairs(const uint16_t* const* row, size_t k, uint16_t* dst) {
  __m128i a[4];
  for (int i = 0; i < 4; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[i] + k));
  const __m128i p01 = _mm_unpacklo_epi32(a[0], a[1]), p23 = _mm_unpacklo_epi32(a[2], a[3]);
  const __m128i q01 = _mm_unpackhi_epi32(a[0], a[1]), q23 = _mm_unpackhi_epi32(a[2], a[3]);
  const __m128i pairs[4] = {_mm_unpacklo_epi64(p01, p23), _mm_unpackhi_epi64(p01, p23),
                            _mm_unpacklo_epi64(q01, q23), _mm_unpackhi_epi64(q01, q23)};
  for (size_t q = 0; q < 4; ++q)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + q * 2 * kP), pairs[q]);
}
#endif

// The two panel layouts (panels.h), each with its SSE2 transposition of a group of rows x
// columns (group(row + i, k, dst + at(i, k))): k-major (element (i, k) of a panel at k * 16 + i)
// and bf16's pairs of columns (at (k / 2) * 32 + 2 i + k % 2).
template <class W>
struct KMajor {
  static constexpr size_t kGroupRows = 16 / sizeof(W), kGroupCols = kGroupRows;
  static size_t at(size_t i, size_t k) { return k * kP + i; }
#if defined(__SSE2__)
  static void group(const W* const* row, size_t k, W* dst) {
    transpose_square(row, k, dst);
  }
#endif
};
struct Pairs {
  static constexpr size_t kGroupRows = 4,
                          kGroupCols = 8;  // kGroupCols even: groups begin on a pair
  static size_t at(size_t i, size_t k) { return k / 2 * 2 * kP + 2 * i + k % 2; }
#if defined(__SSE2__)
  static void group(const uint16_t* const* row, size_t k, uint16_t* dst) {
    transpose_pairs(row, k, dst);
  }
#endif
};

// The lane-major order of an fp32 panel (pack_lane_major_panel): column k of the rows at
// ((k % lanes) * stride + k / lanes) * 16. A group's 4 columns (k % 4 == 0, lanes % 4 == 0) are
// one chunk of 4 neighbouring lanes: they lie `stride` columns apart.
struct LaneMajor {
  static constexpr size_t kGroupRows = 4, kGroupCols = 4;
  size_t shift, stride;  // lanes = 2^shift
  size_t at(size_t i, size_t k) const {
    return ((k & ((size_t{1} << shift) - 1)) * stride + (k >> shift)) * kP + i;
  }
#if defined(__SSE2__)
  void group(const float* const* row, size_t k, float* dst) const {
    transpose_square(row, k, dst, stride * kP);
  }
#endif
};

// Columns [k_begin, k_end) of panel p's rows of the row-major src (rows src_stride elements apart,
// its first element column src_k0) into dst in `layout`. Writes only the elements of rows that
// exist: the callers zero the missing rows and padding columns (pack_panels,
// pack_lane_major_panel).
template <class L, class W>
void pack_panel(const L& layout, const W* src, size_t src_stride, int64_t rows, int64_t p,
                size_t k_begin, size_t k_end, W* dst, size_t src_k0 = 0) {
  const int64_t r0 = p * kPanelRows;
  const auto n = static_cast<size_t>(std::min<int64_t>(kPanelRows, rows - r0));
  const W* row[kP];
  for (size_t i = 0; i < n; ++i) row[i] = src + (static_cast<size_t>(r0) + i) * src_stride;
  // Columns in blocks of 64: the block's 16 row pieces stay in L1 while it is written.
  constexpr size_t kBlock = 64;                              // a multiple of kGroupCols
  const size_t grouped = n / L::kGroupRows * L::kGroupRows;  // rows in whole groups
  for (size_t k0 = k_begin; k0 < k_end;) {
    const size_t k1 = std::min(k_end, (k0 / kBlock + 1) * kBlock);  // blocks on multiples of 64
    // Columns [g0, g1): whole groups from a multiple of kGroupCols (a lane-major group is 4 lanes
    // of one chunk, a pair group begins on a pair); the others element by element.
    size_t g0 = k1, g1 = k1;
#if defined(__SSE2__)
    g0 = std::min(k1, (k0 + L::kGroupCols - 1) / L::kGroupCols * L::kGroupCols);
    g1 = g0 + (k1 - g0) / L::kGroupCols * L::kGroupCols;
    // A group of columns for every group of rows in turn, so each column's line is written whole
    // before the next (a lane-major panel's columns lie far apart).
    for (size_t k = g0; k < g1; k += L::kGroupCols)
      for (size_t i = 0; i < grouped; i += L::kGroupRows)
        layout.group(row + i, k - src_k0, dst + layout.at(i, k));
#endif
    const auto one = [&](size_t k) {
      for (size_t i = 0; i < grouped; ++i) dst[layout.at(i, k)] = row[i][k - src_k0];
    };
    for (size_t k = k0; k < g0; ++k) one(k);
    for (size_t k = g1; k < k1; ++k) one(k);
    for (size_t i = grouped; i < n; ++i)
      for (size_t c = k0; c < k1; ++c) dst[layout.at(i, c)] = row[i][c - src_k0];
    k0 = k1;
  }
}

// The lane count of a lane-major panel or input: a power of two, 4 or more (so a group of 4
// columns of the SSE2 transposition is 4 neighbouring lanes of one chunk).
void check_lanes(int lanes) {
  WICK_CHECK(lanes >= 4 && (lanes & (lanes - 1)) == 0,
             "the lane-major order takes a power of two (4 or more) lanes");
}

// The bytes of panel p's elements from column k0 on (k0 even for pairs).
const uint8_t* panel_at(const MatrixRef& w, int64_t p, int64_t k0) {
  const int64_t es = static_cast<int64_t>(dtype_size(w.dtype));
  const int64_t c = panel_cols(w.cols, w.dtype);
  return static_cast<const uint8_t*>(w.data) + (p * kPanelRows * c + k0 * kPanelRows) * es;
}

}  // namespace

int64_t panel_count(int64_t rows) {
  return (rows + kPanelRows - 1) / kPanelRows;
}

size_t panel_bytes(int64_t rows, int64_t cols, DType dtype) {
  WICK_CHECK(dense_dtype(dtype), "panels hold F32/F16/BF16 matrices only");
  WICK_CHECK(rows >= 0 && cols >= 0, "a matrix size is not negative");
  return static_cast<size_t>(panel_count(rows) * kPanelRows * panel_cols(cols, dtype)) *
         dtype_size(dtype);
}

MatrixRef pack_panels(const MatrixRef& w, void* dst, ThreadPool& pool) {
  check_dense_matrix(w);
  WICK_CHECK(w.layout == MatrixLayout::kRows, "pack_panels() packs row-major matrices");
  const size_t cols = static_cast<size_t>(w.cols);
  parallel_for(pool, panel_count(w.rows), w.rows * w.cols, [&](int64_t p, Arena&) {
    const size_t padded = static_cast<size_t>(panel_cols(w.cols, w.dtype));
    const size_t at = static_cast<size_t>(p) * kP * padded;
    const size_t es = dtype_size(w.dtype);
    if ((p + 1) * kPanelRows > w.rows || padded != cols)  // missing rows, a padding column
      std::memset(static_cast<uint8_t*>(dst) + at * es, 0, kP * padded * es);
    const auto* h = static_cast<const uint16_t*>(w.data);
    auto* hd = static_cast<uint16_t*>(dst) + at;
    if (w.dtype == DType::F32)
      pack_panel(KMajor<float>{}, static_cast<const float*>(w.data), cols, w.rows, p, 0, cols,
                 static_cast<float*>(dst) + at);
    else if (panel_pairs(w.dtype))
      pack_panel(Pairs{}, h, cols, w.rows, p, 0, cols, hd);
    else
      pack_panel(KMajor<uint16_t>{}, h, cols, w.rows, p, 0, cols, hd);
  });
  return {dst, w.dtype, w.rows, w.cols, MatrixLayout::kPanels};
}

int64_t lane_major_chunks(int64_t n, int lanes) {
  return (n + lanes - 1) / lanes;
}

int64_t lane_major_stride(int64_t n, int lanes) {
  return lane_major_chunks(n, lanes) + 1;
}

void pack_lane_major_panel(const float* rows, size_t row_stride, int64_t nr, size_t n, int lanes,
                           float* dst, TransposeLanes transpose, size_t k_begin, size_t k_end) {
  check_lanes(lanes);
  k_end = std::min(k_end, n);
  WICK_CHECK(nr >= 1 && nr <= kPanelRows && k_begin < k_end && row_stride >= k_end - k_begin,
             "a lane-major panel packs 1-16 rows of a non-empty range of columns (row_stride >= "
             "its width)");
  const auto stride = static_cast<size_t>(lane_major_stride(static_cast<int64_t>(n), lanes));
  const auto shift = static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(lanes)));
  const size_t l = static_cast<size_t>(lanes);
  if (k_begin == 0) {  // the first block's call zeroes what no element lands in
    if (nr < kPanelRows) {
      std::fill_n(dst, kP * l * stride, 0.0f);
    } else {  // only the columns no element lands in: lane j's past its ceil((n - j) / lanes)
      for (size_t j = 0; j < l; ++j) {
        const size_t used = j < n ? (n - j + l - 1) / l : 0;
        std::fill(dst + (j * stride + used) * kP, dst + (j + 1) * stride * kP, 0.0f);
      }
    }
  }
  const LaneMajor layout{shift, stride};
  // The whole chunks [t0, t1) of a full panel through the ISA's transposition, the columns before
  // and after them group by group.
  size_t t0 = k_begin, t1 = k_begin;
  if (transpose != nullptr && nr == kPanelRows) {
    t0 = std::min(k_end, (k_begin + l - 1) / l * l);
    t1 = std::max(t0, k_end / l * l);
    const float* row[kP];
    for (size_t i = 0; i < kP; ++i) row[i] = rows + i * row_stride;
    for (size_t c = t0; c < t1; c += l)
      transpose(row, c - k_begin, dst + layout.at(0, c), stride * kP);
  }
  pack_panel(layout, rows, row_stride, nr, 0, k_begin, t0, dst, k_begin);
  pack_panel(layout, rows, row_stride, nr, 0, t1, k_end, dst, k_begin);
}

void lane_major_inputs(const float* x, size_t n, int lanes, float* dst) {
  check_lanes(lanes);
  const auto l = static_cast<size_t>(lanes);
  const auto stride = static_cast<size_t>(lane_major_stride(static_cast<int64_t>(n), lanes));
  const size_t full = n / l;        // whole chunks
  for (size_t j = 0; j < l; ++j) {  // the partial chunk's lanes (or zeros) and the padding
    for (size_t c = full; c < stride; ++c) {
      const size_t k = c * l + j;
      dst[j * stride + c] = k < n ? x[k] : 0.0f;
    }
  }
  size_t c = 0;
#if defined(__SSE2__)
  for (; c + 4 <= full; c += 4) {  // 4 chunks x 4 lanes at a time: a square of the transposition
    const float* chunk[4] = {x + c * l, x + (c + 1) * l, x + (c + 2) * l, x + (c + 3) * l};
    for (size_t j = 0; j < l; j += 4) transpose_square(chunk, j, dst + j * stride + c, stride);
  }
#endif
  for (; c < full; ++c)
    for (size_t j = 0; j < l; ++j) dst[j * stride + c] = x[c * l + j];
}

void panel_gemv_block(const DotKernels& k, const MatrixRef& w, const float* x, int64_t r0,
                      int64_t r1, float* y) {
  const size_t cols = static_cast<size_t>(w.cols);
  const void* p = panel_at(w, r0 / kPanelRows, 0);
  switch (w.dtype) {
    case DType::F32:
      return k.panel_gemv_f32(static_cast<const float*>(p), cols, x, r1 - r0, y + r0);
    case DType::F16:
      return k.panel_gemv_f16(static_cast<const uint16_t*>(p), cols, x, r1 - r0, y + r0);
    default:
      return k.panel_gemv_bf16(static_cast<const uint16_t*>(p), cols, x, r1 - r0, y + r0);
  }
}

work::GemmItems panel_gemm_items(const DotKernels& k, const MatrixRef& w, int64_t T, int threads) {
  // Items' rows: whole tiles (so whole panels).
  const int64_t tile_rows = std::max<int64_t>(kPanelRows, k.panel_tile_rows);
  const int64_t held_row_bytes =
      std::min(kPanelColumnBlock, w.cols) * static_cast<int64_t>(sizeof(float));
  return work::gemm_items(w.rows, T, tile_rows, held_row_bytes, threads);
}

void panel_gemm_item(const DotKernels& k, const MatrixRef& w, const float* x, float* y,
                     const work::GemmItems::Item& item, Arena& arena) {
  const int64_t r0 = item.r0, r1 = item.r1, t0 = item.t0, t1 = item.t1;
  const size_t cols = static_cast<size_t>(w.cols), ys = static_cast<size_t>(w.rows);
  const int64_t p0 = r0 / kPanelRows, p1 = panel_count(r1);
  const bool widen = w.dtype != DType::F32 && t1 - t0 >= kPanelWidenMinInputs;
  for (int64_t k0 = 0; k0 < w.cols; k0 += kPanelColumnBlock) {
    const size_t nk = static_cast<size_t>(std::min(kPanelColumnBlock, w.cols - k0));
    const bool accumulate = k0 > 0;
    const void* wb = panel_at(w, p0, k0);
    size_t ps = kP * static_cast<size_t>(panel_cols(w.cols, w.dtype));
    if (widen) {  // the item's panels' block of columns as fp32, panel stride 16 nk_p
      // Pairs widen whole: a last odd column's pair brings its padding column along (never read).
      const size_t nk_p = static_cast<size_t>(panel_cols(static_cast<int64_t>(nk), w.dtype));
      float* block = arena.get<float>(static_cast<size_t>(p1 - p0) * kP * nk_p, Arena::kBlock0);
      const auto widen16 = panel_pairs(w.dtype) ? k.panel_widen_bf16 : k.widen_f16;
      for (int64_t p = p0; p < p1; ++p)
        widen16(reinterpret_cast<const uint16_t*>(panel_at(w, p, k0)),
                block + static_cast<size_t>(p - p0) * kP * nk_p, kP * nk_p);
      wb = block;
      ps = kP * nk_p;
    }
    const DType held = widen ? DType::F32 : w.dtype;
    for (int64_t t = t0; t < t1; t += k.panel_tile_inputs) {
      const int nt = static_cast<int>(std::min<int64_t>(k.panel_tile_inputs, t1 - t));
      const float* xt = x + static_cast<size_t>(t) * cols + static_cast<size_t>(k0);
      float* yt = y + static_cast<size_t>(t) * ys + static_cast<size_t>(r0);
      if (held == DType::F32)
        k.panel_tile_f32(static_cast<const float*>(wb), ps, xt, cols, nk, r1 - r0, nt, yt, ys,
                         accumulate);
      else
        (held == DType::F16 ? k.panel_tile_f16 : k.panel_tile_bf16)(
            static_cast<const uint16_t*>(wb), ps, xt, cols, nk, r1 - r0, nt, yt, ys, accumulate);
    }
  }
}

}  // namespace wick::kernels
