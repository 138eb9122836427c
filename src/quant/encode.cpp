// Encoders of docs/rwkvq-format.md §3.2-3.5. Compiled with -ffp-contract=off (src/CMakeLists.txt):
// every product and sum below is rounded to float32 on its own, as in the reference.
#include "quant/encode.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/thread_pool.h"
#include "quant/dequant.h"
#include "wick/errors.h"
#include "wick/runtime.h"

namespace wick::quant {
namespace {

using base::f32_to_f16;
// half(x): round to fp16 (RNE, subnormals kept) and widen back exactly.
inline float half(float x) {
  return base::round_to_half(x);
}

inline float clampf(float x, float lo, float hi) {
  return std::min(std::max(x, lo), hi);
}

// clamp(rne(x), lo, hi) as an integer. x must not be NaN (callers handle the 0/0 cases first);
// an infinity clamps to the bound.
inline int round_clamp(float x, int lo, int hi) {
  return static_cast<int>(clampf(rne(x), static_cast<float>(lo), static_cast<float>(hi)));
}

// a / b for the scale codes, where b may be an fp16 super-scale that underflowed to 0: IEEE
// division then gives +-inf (clamped to a bound by the caller) or NaN for 0/0, which the spec maps
// to `nan_value`. Written out so that no NaN reaches an integer conversion.
inline int scale_code(float a, float b, int lo, int hi, int nan_value) {
  if (b == 0.0f) {
    if (a > 0.0f) return hi;
    if (a < 0.0f) return lo;
    return nan_value;
  }
  return round_clamp(a / b, lo, hi);
}

inline void put_f16(uint8_t* p, float x) {
  const uint16_t h = f32_to_f16(x);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

inline void put_f32(uint8_t* p, float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>((u >> (8 * i)) & 0xff);
}

// Four 6-bit values into three bytes, LSB first (§2.1 "6-bit stream").
inline void pack6x4(const int* v, uint8_t* out) {
  const uint32_t x = static_cast<uint32_t>(v[0]) | (static_cast<uint32_t>(v[1]) << 6) |
                     (static_cast<uint32_t>(v[2]) << 12) | (static_cast<uint32_t>(v[3]) << 18);
  out[0] = static_cast<uint8_t>(x & 0xff);
  out[1] = static_cast<uint8_t>((x >> 8) & 0xff);
  out[2] = static_cast<uint8_t>((x >> 16) & 0xff);
}

// Block-local nibble split (§2.1): block of `gs` codes -> gs/2 bytes, byte j = code j (low nibble)
// | code j + gs/2 (high nibble).
inline void pack_nibbles(const int* q, int gs, uint8_t* out) {
  const int h = gs / 2;
  for (int j = 0; j < h; ++j) {
    out[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + h] & 15) << 4));
  }
}

// Sets bit `bit` of every code of a block into a row bit-plane (§2.1): column c -> bit c % 8 of
// byte c / 8. `col0` is the block's first column (a multiple of 8).
inline void pack_plane(const int* q, int n, int bit, int64_t col0, uint8_t* plane) {
  for (int c = 0; c < n; c += 8) {
    uint8_t byte = 0;
    for (int k = 0; k < 8; ++k) byte |= static_cast<uint8_t>(((q[c + k] >> bit) & 1) << k);
    plane[(col0 + c) / 8] = byte;
  }
}

// Sum of one block (n = 16 or 32 values) in the order rwkv-quant's reference gets it: torch's
// vectorised CPU reduction over a contiguous last axis (torch 1.13, AVX2 kernels: 8-lane
// vectors), not index order. The row is read as n/8 vectors v0, v1, ...; the first four (or all,
// when fewer) are the partial sums p0..p3, further vectors are added to p0, then p0 + p1 + p2 + p3
// lane-wise in that order, and finally the 8 lanes are added one after another to 0. With this
// order the search encoders reproduce the fixtures' sb6 super-scales bit for bit (with index
// order 1 superblock of 2048 in the unweighted emb search differs by 1 ulp of dm, moving 3
// codes; with the 16-lane AVX-512 order likewise).
float block_sum(const float* x, int n) {
  constexpr int kLanes = 8;
  const int nv = n / kLanes;
  float p[4][kLanes] = {};
  for (int v = 0; v < nv; ++v) {
    float* acc = p[v < 4 ? v : 0];
    for (int l = 0; l < kLanes; ++l) acc[l] += x[v * kLanes + l];
  }
  for (int k = 1; k < 4; ++k)
    for (int l = 0; l < kLanes; ++l) p[0][l] += p[k][l];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += p[0][l];
  return s;
}

int64_t checked_numel(const std::vector<int64_t>& shape, const char* what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw InputError(std::string(what) + ": negative dimension in a tensor shape");
    if (d != 0 && n > INT64_MAX / d) throw InputError(std::string(what) + ": tensor too large");
    n *= d;
  }
  return n;
}

EncodedBuffer make_buffer(std::string field, DType dtype, std::vector<int64_t> shape) {
  EncodedBuffer b;
  b.field = std::move(field);
  b.dtype = dtype;
  const int64_t n = checked_numel(shape, "encoder");
  b.shape = std::move(shape);
  b.bytes.assign(static_cast<size_t>(n) * dtype_size(dtype), 0);
  return b;
}

// Runs fn(row0, row1) over the rows in bands on `pool` (rows are independent); null: a pool of
// the default size for this call.
template <typename Fn>
void for_row_bands(kernels::ThreadPool* pool, int64_t rows, int64_t cols, Fn&& fn) {
  std::unique_ptr<kernels::ThreadPool> own;
  if (!pool) {
    own = std::make_unique<kernels::ThreadPool>(default_thread_count());
    pool = own.get();
  }
  // About 64K weights per band: enough work per claim, enough bands to balance.
  const int64_t band = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(cols, 1));
  const int64_t n = (rows + band - 1) / band;
  kernels::parallel_for(*pool, n, [&](int64_t b) { fn(b * band, std::min(rows, (b + 1) * band)); });
}

void check_matrix(int64_t rows, int64_t cols, const char* layout) {
  if (rows < 1 || cols < 1) {
    throw InputError(std::string(layout) +
                     " encoder: expected a matrix with at least one row and "
                     "one column, found [" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
}

// ---- sb6 (§3.2) ----

constexpr int kSb6Gs = 32;
constexpr int kSb6Sb = 8;

// Step 1 (and 2 for the search mode): the block's scale and min before superblock quantisation.
// `e`: the block's column weights max(E[x^2], 1e-12) for the activation-weighted mode, else null.
void sb6_block_scale(const float* w, const float* e, float fqmax, Sb6Mode mode, float* scale_out,
                     float* min_out) {
  float mn = w[0], mx = w[0];
  for (int c = 1; c < kSb6Gs; ++c) {
    mn = std::min(mn, w[c]);
    mx = std::max(mx, w[c]);
  }
  float scale = std::max((mx - mn) / fqmax, 1e-8f);
  if (mode != Sb6Mode::kPlain) {
    static constexpr float kFactors[8] = {0.7f, 0.75f, 0.8f, 0.85f, 0.9f, 0.95f, 1.0f, 1.05f};
    const bool weighted = e != nullptr;
    float best_err = 0.0f, best_s = 0.0f, best_m = 0.0f;
    float qq[kSb6Gs];
    float t1[kSb6Gs], t2[kSb6Gs];
    // Unweighted: means over the 32 values; weighted: sums of e*x over the sum of e.
    float n = static_cast<float>(kSb6Gs);
    float wbar;
    if (weighted) {
      n = block_sum(e, kSb6Gs);
      for (int c = 0; c < kSb6Gs; ++c) t1[c] = e[c] * w[c];
      wbar = block_sum(t1, kSb6Gs) / n;
    } else {
      wbar = block_sum(w, kSb6Gs) / n;
    }
    for (int k = 0; k < 8; ++k) {
      const float sc = scale * kFactors[k];
      for (int c = 0; c < kSb6Gs; ++c) qq[c] = clampf(rne((w[c] - mn) / sc), 0.0f, fqmax);
      float qbar;
      if (weighted) {
        for (int c = 0; c < kSb6Gs; ++c) t1[c] = e[c] * qq[c];
        qbar = block_sum(t1, kSb6Gs) / n;
      } else {
        qbar = block_sum(qq, kSb6Gs) / n;
      }
      for (int c = 0; c < kSb6Gs; ++c) {
        const float dq = qq[c] - qbar;
        const float dw = w[c] - wbar;
        if (weighted) {
          const float edq = e[c] * dq;
          t1[c] = edq * dw;
          t2[c] = edq * dq;
        } else {
          t1[c] = dq * dw;
          t2[c] = dq * dq;
        }
      }
      const float cov = block_sum(t1, kSb6Gs);
      const float var = std::max(block_sum(t2, kSb6Gs), 1e-12f);
      float s_ls = cov / var;
      const float t = s_ls * qbar;
      const float m_ls = wbar - t;  // from the fitted slope, before the fallback below
      if (!(s_ls > 1e-8f)) s_ls = sc;
      for (int c = 0; c < kSb6Gs; ++c) {
        const float q2 = clampf(rne((w[c] - m_ls) / s_ls), 0.0f, fqmax);
        const float prod = q2 * s_ls;
        const float rec = prod + m_ls;
        const float diff = rec - w[c];
        const float sq = diff * diff;
        t1[c] = weighted ? e[c] * sq : sq;
      }
      const float err = block_sum(t1, kSb6Gs);
      if (k == 0 || err < best_err) {
        best_err = err;
        best_s = s_ls;
        best_m = m_ls;
      }
    }
    scale = std::max(best_s, 1e-8f);
    mn = best_m;
  }
  *scale_out = scale;
  *min_out = mn;
}

void sb6_row(const float* w, const float* e, int64_t cols, int bits, Sb6Mode mode, uint8_t* packed,
             uint8_t* qh, uint8_t* qh2, uint8_t* qsqm, uint8_t* d_out, uint8_t* dm_out) {
  const int qmax = (1 << bits) - 1;
  const float fqmax = static_cast<float>(qmax);
  const int64_t nsb = cols / (kSb6Gs * kSb6Sb);
  for (int64_t j = 0; j < nsb; ++j) {
    const float* ws = w + j * kSb6Gs * kSb6Sb;
    float scale[kSb6Sb], mn[kSb6Sb];
    for (int i = 0; i < kSb6Sb; ++i) {
      const int64_t col0 = (j * kSb6Sb + i) * kSb6Gs;
      sb6_block_scale(ws + i * kSb6Gs, e ? e + col0 : nullptr, fqmax, mode, &scale[i], &mn[i]);
    }
    // Super-scales: fp16 first, then the 6-bit codes against the rounded value.
    float smax = scale[0] / 63.0f, mmax = std::abs(mn[0]) / 31.0f;
    for (int i = 1; i < kSb6Sb; ++i) {
      smax = std::max(smax, scale[i] / 63.0f);
      mmax = std::max(mmax, std::abs(mn[i]) / 31.0f);
    }
    const float d = half(std::max(smax, 1e-12f));
    const float dm = half(std::max(mmax, 1e-12f));
    int qs[kSb6Sb], qm_stored[kSb6Sb];
    float s_eff[kSb6Sb], m_eff[kSb6Sb];
    for (int i = 0; i < kSb6Sb; ++i) {
      qs[i] = scale_code(scale[i], d, 1, 63, 1);  // scale >= 1e-8, so never 0/0
      const int qm = scale_code(mn[i], dm, -31, 31, 0);
      qm_stored[i] = qm + 31;
      s_eff[i] = std::max(half(static_cast<float>(qs[i]) * d), 1e-8f);
      m_eff[i] = half(static_cast<float>(qm) * dm);
    }
    put_f16(d_out + 2 * j, d);
    put_f16(dm_out + 2 * j, dm);
    pack6x4(qs, qsqm + 12 * j);
    pack6x4(qs + 4, qsqm + 12 * j + 3);
    pack6x4(qm_stored, qsqm + 12 * j + 6);
    pack6x4(qm_stored + 4, qsqm + 12 * j + 9);
    // Codes against the quantised scales (step 4).
    for (int i = 0; i < kSb6Sb; ++i) {
      const int64_t col0 = (j * kSb6Sb + i) * kSb6Gs;
      int q[kSb6Gs];
      for (int c = 0; c < kSb6Gs; ++c) {
        q[c] = round_clamp((w[col0 + c] - m_eff[i]) / s_eff[i], 0, qmax);
      }
      pack_nibbles(q, kSb6Gs, packed + col0 / 2);
      if (bits >= 5) pack_plane(q, kSb6Gs, 4, col0, qh);
      if (bits == 6) pack_plane(q, kSb6Gs, 5, col0, qh2);
    }
  }
}

// ---- sym (§3.3) ----

constexpr int kSymGs = 16;
constexpr int kSymSb = 16;

// float32 values of torch.linspace(0.7, 1.15, 19), bit for bit (§3.3).
constexpr uint32_t kSymFactorBits[19] = {0x3f333333, 0x3f399999, 0x3f400000, 0x3f466666, 0x3f4ccccc,
                                         0x3f533333, 0x3f599999, 0x3f600000, 0x3f666666, 0x3f6ccccc,
                                         0x3f733333, 0x3f799999, 0x3f800000, 0x3f833333, 0x3f866666,
                                         0x3f899999, 0x3f8ccccd, 0x3f900000, 0x3f933333};

// `e`: the block's column weights for the activation-weighted mode, else null.
float sym_block_scale(const float* w, const float* e, int qmax, SymMode mode) {
  const float fqmax = static_cast<float>(qmax);
  const float fqmin = -fqmax - 1.0f;
  float amax = std::abs(w[0]);
  for (int c = 1; c < kSymGs; ++c) amax = std::max(amax, std::abs(w[c]));
  amax = std::max(amax, 1e-12f);
  const float base = amax / fqmax;
  if (mode == SymMode::kPlain) return base * 1.0f;
  float best_err = 0.0f, best_s = 0.0f;
  float t1[kSymGs];
  for (int k = 0; k < 19; ++k) {
    const float s = base * std::bit_cast<float>(kSymFactorBits[k]);
    for (int c = 0; c < kSymGs; ++c) {
      const float q = clampf(rne(w[c] / s), fqmin, fqmax);
      const float prod = q * s;
      const float diff = w[c] - prod;
      const float sq = diff * diff;
      t1[c] = e ? e[c] * sq : sq;
    }
    const float err = block_sum(t1, kSymGs);
    if (k == 0 || err < best_err) {
      best_err = err;
      best_s = s;
    }
  }
  return best_s;
}

void sym_row(const float* w, const float* e, int64_t cols, int bits, SymMode mode, int8_t* codes8,
             uint8_t* packed, uint8_t* qh, uint8_t* qh2, uint8_t* d_out, int8_t* qs_out) {
  const int qmax = (1 << (bits - 1)) - 1;
  const int qmin = -qmax - 1;
  const int64_t nsb = cols / (kSymGs * kSymSb);
  for (int64_t j = 0; j < nsb; ++j) {
    float best_s[kSymSb];
    float smax = 0.0f;
    for (int i = 0; i < kSymSb; ++i) {
      const int64_t col0 = (j * kSymSb + i) * kSymGs;
      best_s[i] = sym_block_scale(w + col0, e ? e + col0 : nullptr, qmax, mode);
      const float r = best_s[i] / 127.0f;
      smax = (i == 0) ? r : std::max(smax, r);
    }
    const float d = half(std::max(smax, 1e-12f));
    put_f16(d_out + 2 * j, d);
    for (int i = 0; i < kSymSb; ++i) {
      const int64_t b = j * kSymSb + i;
      const int64_t col0 = b * kSymGs;
      const int qs = scale_code(best_s[i], d, -128, 127, 0);
      qs_out[b] = static_cast<int8_t>(qs);
      const float s = half(static_cast<float>(qs) * d);
      int q[kSymGs];
      for (int c = 0; c < kSymGs; ++c) {
        q[c] = (s != 0.0f) ? round_clamp(w[col0 + c] / s, qmin, qmax) : 0;
      }
      if (bits == 8) {
        for (int c = 0; c < kSymGs; ++c) codes8[col0 + c] = static_cast<int8_t>(q[c]);
      } else {
        int u[kSymGs];
        for (int c = 0; c < kSymGs; ++c) u[c] = q[c] + 32;
        pack_nibbles(u, kSymGs, packed + col0 / 2);
        pack_plane(u, kSymGs, 4, col0, qh);
        pack_plane(u, kSymGs, 5, col0, qh2);
      }
    }
  }
}

}  // namespace

const std::vector<std::string>& field_order() {
  static const std::vector<std::string> kOrder = {
      "codes", "codes_packed", "scale", "dense",  "outlier_indices", "outlier_values", "gw_d",
      "gw_dm", "gw_qsqm",      "gw_qh", "gw_qh2", "gw_scale",        "gw_min",         "gw_qs"};
  return kOrder;
}

int field_rank(std::string_view field) {
  const auto& o = field_order();
  for (size_t i = 0; i < o.size(); ++i)
    if (o[i] == field) return static_cast<int>(i);
  return static_cast<int>(o.size());
}

const EncodedBuffer* EncodedTensor::find(std::string_view field) const {
  for (const EncodedBuffer& b : buffers)
    if (b.field == field) return &b;
  return nullptr;
}

uint64_t EncodedTensor::stored_bytes() const {
  uint64_t n = 0;
  for (const EncodedBuffer& b : buffers) n += b.bytes.size();
  return n;
}

float rne(float x) {
  return std::nearbyint(x);
}

namespace {

// Column weights of the activation-weighted modes: max(E[x^2], 1e-12), checked.
std::vector<float> column_weights(const float* act, int64_t cols, bool needed, const char* what) {
  if (!needed) return {};
  if (act == nullptr) {
    throw InputError(std::string(what) +
                     ": the activation-weighted mode needs E[x^2] per input "
                     "column (act stats)");
  }
  std::vector<float> e(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    if (!(act[c] >= 0.0f) || !std::isfinite(act[c])) {
      throw InputError(std::string(what) + ": activation statistic of column " + std::to_string(c) +
                       " is " + std::to_string(act[c]) + "; expected a finite E[x^2] >= 0");
    }
    e[c] = std::max(act[c], 1e-12f);
  }
  return e;
}

}  // namespace

EncodedTensor encode_sb6(const float* w, int64_t rows, int64_t cols, int bits, Sb6Mode mode,
                         const float* act, kernels::ThreadPool* pool) {
  check_matrix(rows, cols, "sb6");
  if (bits < 4 || bits > 6) {
    throw InputError("sb6 encoder: bits must be 4, 5 or 6, got " + std::to_string(bits));
  }
  if (cols % (kSb6Gs * kSb6Sb) != 0) {
    throw InputError(
        "sb6 encoder: the number of columns must be a multiple of 256 (block 32 x "
        "superblock 8), found " +
        std::to_string(cols));
  }
  const int64_t nsb = cols / (kSb6Gs * kSb6Sb);
  EncodedTensor t;
  t.layout = Layout::kSb6;
  t.bits = bits;
  t.gs = kSb6Gs;
  t.sb = kSb6Sb;
  t.n_blocks = cols / kSb6Gs;
  const std::vector<float> e =
      column_weights(act, cols, mode == Sb6Mode::kActivationWeighted, "sb6 encoder");
  const float* ep = e.empty() ? nullptr : e.data();
  EncodedBuffer packed = make_buffer("codes_packed", DType::U8, {rows, cols / 2});
  EncodedBuffer d = make_buffer("gw_d", DType::F16, {rows, nsb});
  EncodedBuffer dm = make_buffer("gw_dm", DType::F16, {rows, nsb});
  EncodedBuffer qsqm = make_buffer("gw_qsqm", DType::U8, {rows, nsb, 12});
  EncodedBuffer qh, qh2;
  if (bits >= 5) qh = make_buffer("gw_qh", DType::U8, {rows, cols / 8});
  if (bits == 6) qh2 = make_buffer("gw_qh2", DType::U8, {rows, cols / 8});
  for_row_bands(pool, rows, cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      sb6_row(w + r * cols, ep, cols, bits, mode, packed.bytes.data() + r * (cols / 2),
              bits >= 5 ? qh.bytes.data() + r * (cols / 8) : nullptr,
              bits == 6 ? qh2.bytes.data() + r * (cols / 8) : nullptr,
              qsqm.bytes.data() + r * nsb * 12, d.bytes.data() + r * nsb * 2,
              dm.bytes.data() + r * nsb * 2);
    }
  });
  t.buffers.push_back(std::move(packed));
  t.buffers.push_back(std::move(d));
  t.buffers.push_back(std::move(dm));
  t.buffers.push_back(std::move(qsqm));
  if (bits >= 5) t.buffers.push_back(std::move(qh));
  if (bits == 6) t.buffers.push_back(std::move(qh2));
  return t;
}

EncodedTensor encode_sym(const float* w, int64_t rows, int64_t cols, int bits, SymMode mode,
                         const float* act, kernels::ThreadPool* pool) {
  check_matrix(rows, cols, "sym");
  if (bits != 6 && bits != 8) {
    throw InputError("sym encoder: bits must be 6 or 8, got " + std::to_string(bits));
  }
  if (cols % (kSymGs * kSymSb) != 0) {
    throw InputError(
        "sym encoder: the number of columns must be a multiple of 256 (block 16 x "
        "superblock 16), found " +
        std::to_string(cols));
  }
  const int64_t nb = cols / kSymGs;
  const int64_t nsb = nb / kSymSb;
  EncodedTensor t;
  t.layout = Layout::kSym;
  t.bits = bits;
  t.gs = kSymGs;
  t.sb = kSymSb;
  t.n_blocks = nb;
  EncodedBuffer codes, packed, qh, qh2;
  if (bits == 8) {
    codes = make_buffer("codes", DType::I8, {rows, cols});
  } else {
    packed = make_buffer("codes_packed", DType::U8, {rows, cols / 2});
    qh = make_buffer("gw_qh", DType::U8, {rows, cols / 8});
    qh2 = make_buffer("gw_qh2", DType::U8, {rows, cols / 8});
  }
  const std::vector<float> e =
      column_weights(act, cols, mode == SymMode::kActivationWeighted, "sym encoder");
  const float* ep = e.empty() ? nullptr : e.data();
  EncodedBuffer d = make_buffer("gw_d", DType::F16, {rows, nsb});
  EncodedBuffer qs = make_buffer("gw_qs", DType::I8, {rows, nb});
  for_row_bands(pool, rows, cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      sym_row(w + r * cols, ep, cols, bits, mode,
              bits == 8 ? reinterpret_cast<int8_t*>(codes.bytes.data()) + r * cols : nullptr,
              bits == 6 ? packed.bytes.data() + r * (cols / 2) : nullptr,
              bits == 6 ? qh.bytes.data() + r * (cols / 8) : nullptr,
              bits == 6 ? qh2.bytes.data() + r * (cols / 8) : nullptr, d.bytes.data() + r * nsb * 2,
              reinterpret_cast<int8_t*>(qs.bytes.data()) + r * nb);
    }
  });
  if (bits == 8) {
    t.buffers.push_back(std::move(codes));
  } else {
    t.buffers.push_back(std::move(packed));
  }
  t.buffers.push_back(std::move(d));
  if (bits == 6) {
    t.buffers.push_back(std::move(qh));
    t.buffers.push_back(std::move(qh2));
  }
  t.buffers.push_back(std::move(qs));
  return t;
}

EncodedTensor encode_asym(const float* w, int64_t rows, int64_t cols, int bits, int gs,
                          kernels::ThreadPool* pool) {
  check_matrix(rows, cols, "asym");
  if (bits < 5 || bits > 8) {
    throw InputError("asym encoder: bits must be 5..8, got " + std::to_string(bits));
  }
  if (gs < 1) throw InputError("asym encoder: block width must be positive");
  const int64_t nb = (cols + gs - 1) / gs;
  const int qmax = (1 << bits) - 1;
  const float fqmax = static_cast<float>(qmax);
  EncodedTensor t;
  t.layout = Layout::kAsym;
  t.bits = bits;
  t.gs = gs;
  t.sb = 0;
  t.n_blocks = nb;
  EncodedBuffer codes = make_buffer("codes", DType::U8, {rows, cols});
  EncodedBuffer scale = make_buffer("gw_scale", DType::F32, {rows, nb});
  EncodedBuffer mins = make_buffer("gw_min", DType::F32, {rows, nb});
  for_row_bands(pool, rows, cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = w + r * cols;
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t c0 = b * gs, c1 = std::min<int64_t>(cols, c0 + gs);
        float mn = wr[c0], mx = wr[c0];
        for (int64_t c = c0 + 1; c < c1; ++c) {
          mn = std::min(mn, wr[c]);
          mx = std::max(mx, wr[c]);
        }
        if (c1 - c0 < gs) {  // zero padding of a partial last block
          mn = std::min(mn, 0.0f);
          mx = std::max(mx, 0.0f);
        }
        const float s = std::max((mx - mn) / fqmax, 1e-8f);
        for (int64_t c = c0; c < c1; ++c) {
          codes.bytes[static_cast<size_t>(r * cols + c)] =
              static_cast<uint8_t>(round_clamp((wr[c] - mn) / s, 0, qmax));
        }
        put_f32(scale.bytes.data() + (r * nb + b) * 4, s);
        put_f32(mins.bytes.data() + (r * nb + b) * 4, mn);
      }
    }
  });
  t.buffers.push_back(std::move(codes));
  t.buffers.push_back(std::move(scale));
  t.buffers.push_back(std::move(mins));
  return t;
}

EncodedTensor encode_rtn(const float* w, const std::vector<int64_t>& shape, int bits,
                         const float* act, kernels::ThreadPool* pool) {
  if (shape.size() < 2) {
    throw InputError("rtn encoder: expected a tensor of rank >= 2, found rank " +
                     std::to_string(shape.size()));
  }
  const int64_t numel = checked_numel(shape, "rtn encoder");
  const int64_t rows = shape[0];
  const int64_t cols = rows > 0 ? numel / rows : 0;
  check_matrix(rows, cols, "rtn");
  if (bits < 2 || bits > 8) {
    throw InputError("rtn encoder: bits must be 2..8, got " + std::to_string(bits));
  }
  if (bits <= 4 && shape.size() != 2) {
    throw InputError("rtn encoder: packed codes (bits <= 4) need a 2-D tensor");
  }
  const int qmax = (1 << (bits - 1)) - 1;
  const float fqmax = static_cast<float>(qmax);
  const int64_t half_cols = (cols + 1) / 2;
  EncodedTensor t;
  t.layout = Layout::kRtn;
  t.bits = bits;
  EncodedBuffer codes;
  if (bits >= 5) {
    codes = make_buffer("codes", DType::I8, shape);
  } else {
    codes = make_buffer("codes_packed", DType::U8, {rows, half_cols});
  }
  std::vector<int64_t> sshape(shape.size(), 1);
  sshape[0] = rows;
  EncodedBuffer scale = make_buffer("scale", DType::F16, sshape);
  // Activation-weighted variant (§3.5): column weights e / mean(e) and a 23-factor grid.
  std::vector<float> e;
  if (act) {
    e = column_weights(act, cols, true, "rtn encoder");
    float total = 0.0f;
    for (float x : e) total += x;
    const float mean = total / static_cast<float>(cols);
    for (float& x : e) x = x / mean;
  }
  for_row_bands(pool, rows, cols, [&](int64_t r0, int64_t r1) {
    std::vector<int> q(static_cast<size_t>(cols)), trial(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = w + r * cols;
      float amax = std::abs(wr[0]);
      for (int64_t c = 1; c < cols; ++c) amax = std::max(amax, std::abs(wr[c]));
      amax = std::max(amax, 1e-8f);
      float s = amax / fqmax;
      if (e.empty()) {
        for (int64_t c = 0; c < cols; ++c) q[c] = round_clamp(wr[c] / s, -qmax - 1, qmax);
      } else {
        // torch.linspace(0.5, 1.05, 23) in float32: start + step*i for the first half, end -
        // step*(22 - i) for the second.
        const float start = 0.5f, end = 1.05f, step = (end - start) / 22.0f;
        const float base = s;
        float best_err = 0.0f;
        for (int k = 0; k < 23; ++k) {
          const float f = k < 23 / 2 ? start + step * static_cast<float>(k)
                                     : end - step * static_cast<float>(22 - k);
          const float sk = base * f;
          float err = 0.0f;
          for (int64_t c = 0; c < cols; ++c) {
            trial[c] = round_clamp(wr[c] / sk, -qmax - 1, qmax);
            const float diff = wr[c] - static_cast<float>(trial[c]) * sk;
            err += e[c] * (diff * diff);
          }
          if (k == 0 || err < best_err) {
            best_err = err;
            s = sk;
            q.swap(trial);
          }
        }
        // Least-squares scale for the chosen codes (kept when it is positive).
        float num = 0.0f, den = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
          const float qc = static_cast<float>(q[c]);
          num += e[c] * wr[c] * qc;
          den += e[c] * qc * qc;
        }
        const float refined = num / std::max(den, 1e-12f);
        if (refined > 0.0f && std::isfinite(refined)) s = refined;
      }
      put_f16(scale.bytes.data() + r * 2, s);
      if (bits >= 5) {
        for (int64_t c = 0; c < cols; ++c) {
          codes.bytes[static_cast<size_t>(r * cols + c)] =
              static_cast<uint8_t>(static_cast<int8_t>(q[c]));
        }
      } else {
        uint8_t* out = codes.bytes.data() + r * half_cols;
        for (int64_t i = 0; i < half_cols; ++i) {
          const int lo = q[i] + 8;
          const int hi = (i + half_cols < cols) ? q[i + half_cols] + 8 : 8;
          out[i] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  });
  t.buffers.push_back(std::move(codes));
  t.buffers.push_back(std::move(scale));
  return t;
}

EncodedTensor encode_dense_bf16(const float* w, const std::vector<int64_t>& shape) {
  const int64_t n = checked_numel(shape, "dense encoder");
  EncodedTensor t;
  t.layout = Layout::kDense;
  t.bits = 16;
  EncodedBuffer dense = make_buffer("dense", DType::BF16, shape);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = base::f32_to_bf16(w[i]);
    dense.bytes[static_cast<size_t>(2 * i)] = static_cast<uint8_t>(h & 0xff);
    dense.bytes[static_cast<size_t>(2 * i + 1)] = static_cast<uint8_t>(h >> 8);
  }
  t.buffers.push_back(std::move(dense));
  return t;
}

}  // namespace wick::quant
