// Exact float32 dequantisation of every `.rwkvq` layout (docs/rwkvq-format.md §2.2-2.6), in the
// stored orientation (no transpose): bit-identical to rwkv-quant's codec.dequant_key (checked
// against fixtures/rwkvq/dequant_sha256.json). Scalar code written for exactness, not speed: the
// quantised kernels (kernels/qmatmul.h) never materialise a matrix; this is used for small
// tensors unpacked once at load, the embedding row gather and as the oracle of kernel tests.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/rwkvq.h"

namespace wick::quant {

// half(x) of the spec: round a float32 to IEEE fp16 with round-to-nearest-even, subnormals kept
// (no flush to zero), overflow to infinity; and the exact widening back.
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);
// Reads the i-th fp16 of a (possibly unaligned) byte buffer.
float f16_at(const uint8_t* p, int64_t i);

// Rows [row0, row0 + n) of the tensor viewed as [rows(), cols()] into out[n * cols()].
// Any layout; throws InputError when the rows are out of range.
void dequantize_rows(const QuantTensor& t, int64_t row0, int64_t n, float* out);

// The whole tensor, [numel()] in stored row-major order.
std::vector<float> dequantize(const QuantTensor& t);

}  // namespace wick::quant
