// Encoders of the `.rwkvq` layouts (docs/rwkvq-format.md §3.2-3.5): float32 weights in, the
// buffers of §1.4 out, exactly as rwkv-quant's plain (non activation-weighted) quantiser computes
// them. The operation order is the spec's, literally: float32 arithmetic, true division (never a
// multiplication by a reciprocal), rne = round half to even, half() = fp16 RNE with subnormals
// kept. One deliberate refinement: the block sums of the search modes follow torch's vectorised
// CPU reduction order (AVX2, 8 lanes; see block_sum in encode.cpp) rather than index order,
// because that is what reproduces the fixtures bit for bit. encode.cpp is compiled with
// -ffp-contract=off so that no a*b+c is fused: a fused multiply-add rounds once where the
// reference rounds twice.
//
// Modes (§3.1) provided here: `asym_sb6` (plain), `asym_sb6_search` (8-factor grid + least
// squares) and `asym_sb6_aw` (the same weighted by E[x^2] per input column) for sb6; `sym_plain`,
// `sym` (19-factor grid) and `sym_aw` (weighted) for sym; `asym` with zero padding for the LoRA
// blocks; per-row `rtn`, plain or activation-weighted; dense bf16. The weighted sums follow the
// unweighted ones' order with e[c] multiplied in first (e*dq*dw, e*dq*dq, e*err^2); torch's
// exact product order for them is not documented, so a last-ulp difference can move a code
// (docs/rwkvq-format.md §3.11 accepts 99.9 % identical codes for these modes). SpQR outliers are
// not implemented.
//
// Every layout works row by row (row = first axis of the stored tensor); rows are independent, so
// the encoders split the rows over the global thread pool and the result does not depend on the
// number of threads.
//
// Thread-safety: the functions are reentrant (they use the global pool, see kernels/thread_pool.h:
// one caller at a time per pool).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quant/rwkvq.h"
#include "wick/dtype.h"

namespace wick::kernels {
class ThreadPool;
}

namespace wick::quant {

// One buffer of an encoded tensor: the field name of §1.4 (without the "<key>::" prefix), its
// safetensors dtype and shape, and its little-endian bytes.
struct EncodedBuffer {
  std::string field;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A tensor encoded in one layout: what the manifest record says about it (kind, bits, block
// geometry) and its buffers, in the fixed field order of §1.4 (codes, codes_packed, scale, dense,
// outlier_indices, outlier_values, gw_d, gw_dm, gw_qsqm, gw_qh, gw_qh2, gw_scale, gw_min, gw_qs).
struct EncodedTensor {
  Layout layout = Layout::kDense;
  int bits = 16;
  int gs = 0;            // block width (sb6 32, sym 16, asym gs; 0 otherwise)
  int sb = 0;            // blocks per superblock (sb6 8, sym 16; 0 otherwise)
  int64_t n_blocks = 0;  // blocks per row covered by the scale buffers (0 for dense / rtn)
  std::vector<EncodedBuffer> buffers;

  // The buffer named `field`, or null.
  const EncodedBuffer* find(std::string_view field) const;
  // Sum of the buffer sizes in bytes.
  uint64_t stored_bytes() const;
};

// The §1.4 order of the field names; a field's position in it (fields not listed sort last).
const std::vector<std::string>& field_order();
int field_rank(std::string_view field);

// rne(x) of the spec: round to the nearest integer, ties to even (std::nearbyint under the
// default rounding mode; the encoders never change the mode).
float rne(float x);

enum class Sb6Mode {
  kPlain,               // `asym_sb6`: block min and (max - min) / qmax
  kSearch,              // `asym_sb6_search`: 8 factors x least squares, unweighted (§3.2 step 2)
  kActivationWeighted,  // `asym_sb6_aw`: the same, weighted by e = max(E[x^2], 1e-12) per column
};

enum class SymMode {
  kPlain,               // `sym_plain`: factor 1.0 only
  kSearch,              // `sym`: the 19 float32 factors of linspace(0.7, 1.15, 19), unweighted
  kActivationWeighted,  // `sym_aw`: the same factors, error weighted by e per column
};

// sb6 (§2.2, §3.2): w is [rows, cols] row-major, bits 4, 5 or 6, gs 32, sb 8. Buffers:
// codes_packed U8 [rows, cols/2], gw_d F16 [rows, cols/256], gw_dm F16 [rows, cols/256], gw_qsqm
// U8 [rows, cols/256, 12], gw_qh U8 [rows, cols/8] (bits >= 5), gw_qh2 U8 [rows, cols/8] (bits 6).
// Throws InputError when bits is not 4..6, cols is not a positive multiple of 256 or rows < 1.
// The weights must be finite. `act` (kActivationWeighted only, else ignored): E[x^2] [cols];
// InputError when it is missing or holds a negative or non-finite value.
// `pool` (every encoder with one): rows are encoded in bands on it (results do not depend on
// the thread count); null: a pool of default_thread_count() threads for this call.
EncodedTensor encode_sb6(const float* w, int64_t rows, int64_t cols, int bits, Sb6Mode mode,
                         const float* act = nullptr, kernels::ThreadPool* pool = nullptr);

// sym (§2.3, §3.3): w is [rows, cols], bits 8 or 6, gs 16, sb 16. Buffers: bits 8 -> codes I8
// [rows, cols]; bits 6 -> codes_packed U8 [rows, cols/2], gw_qh, gw_qh2 U8 [rows, cols/8]; both
// -> gw_d F16 [rows, cols/256], gw_qs I8 [rows, cols/16]. Throws InputError when bits is not 6 or
// 8, cols is not a positive multiple of 256 or rows < 1. The weights must be finite. `act` as for
// encode_sb6.
EncodedTensor encode_sym(const float* w, int64_t rows, int64_t cols, int bits, SymMode mode,
                         const float* act = nullptr, kernels::ThreadPool* pool = nullptr);

// asym (§2.4, §3.4): w is [rows, cols], bits 5..8, block width gs (64 in the presets); the row is
// padded on the right with zeros to a multiple of gs (the padding takes part in the last block's
// min and max). Buffers: codes U8 [rows, cols], gw_scale F32 [rows, ceil(cols/gs)], gw_min F32
// [rows, ceil(cols/gs)]. Throws InputError for bits outside 5..8, gs < 1, rows or cols < 1.
EncodedTensor encode_asym(const float* w, int64_t rows, int64_t cols, int bits, int gs = 64,
                          kernels::ThreadPool* pool = nullptr);

// Plain per-row rtn (§2.5, §3.5): w has `shape` (rank >= 2), a row is everything after the first
// axis. bits 2..8. Buffers: bits >= 5 -> codes I8 `shape`; bits <= 4 -> codes_packed U8
// [rows, ceil(cols/2)] (biased split nibbles, 2-D only); scale F16 [shape[0], 1, ..., 1] (the
// codes are chosen with the float32 scale, the file holds it rounded to fp16). Throws InputError
// for rank < 2, a zero-sized tensor, bits outside 2..8 or bits <= 4 with rank > 2.
// `act` (optional): E[x^2] per column (length = everything after the first axis) selects the
// activation-weighted variant of §3.5: weights e / mean(e), the 23 float32 factors of
// linspace(0.5, 1.05, 23) times amax / qmax, the factor with the smallest weighted error (strict
// <), then the least-squares scale Σ e·w·q / max(Σ e·q², 1e-12) for the chosen codes (kept only
// when positive).
EncodedTensor encode_rtn(const float* w, const std::vector<int64_t>& shape, int bits,
                         const float* act = nullptr, kernels::ThreadPool* pool = nullptr);

// Dense (§2.6): one buffer `dense` BF16 of `shape` (any rank), each value rounded to nearest even.
EncodedTensor encode_dense_bf16(const float* w, const std::vector<int64_t>& shape);

}  // namespace wick::quant
