// Exact float32 dequantisation of every `.rwkvq` layout (docs/rwkvq-format.md §2.2-2.6), in the
// stored orientation (no transpose): bit-identical to rwkv-quant's codec.dequant_key (checked
// against fixtures/rwkvq/dequant_sha256.json). Scalar code written for exactness, not speed: the
// quantised kernels (kernels/qmatmul.h) never materialise a matrix; this is used for small
// tensors unpacked once at load, the embedding row gather and as the oracle of kernel tests. The
// sb6 and sym layouts go through the kernels' reference decoders (kernels::decode_rows), so the
// fixture hashes check the very code the SIMD decoders are tested against.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/qmatmul.h"
#include "quant/rwkvq.h"

namespace wick::quant {

// Rows [row0, row0 + n) of the tensor viewed as [rows(), cols()] into out[n * cols()].
// Any layout; throws InputError when the rows are out of range.
void dequantize_rows(const QuantTensor& t, int64_t row0, int64_t n, float* out);

// The whole tensor, [numel()] in stored row-major order.
std::vector<float> dequantize(const QuantTensor& t);

// The kernels' view of an sb6 / sym tensor's buffers (borrowed: valid while t's bytes are). t
// must have that layout (the reader checked its buffers' sizes).
kernels::Sb6Matrix sb6_matrix(const QuantTensor& t);
kernels::SymMatrix sym_matrix(const QuantTensor& t);

}  // namespace wick::quant
