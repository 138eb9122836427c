// Packing a loaded model's dense matrices into panels (kernels/panels.h) at load
// (LoadOptions::pack_weights, model/loader.cpp): every Linear the tensor table names
// (model/int8_linear.h table_linears: the blocks' projections, their time-mix LoRA factors and the
// head) that is still dense and row-major becomes a DenseLinear::packed copy, and the pages of the
// mapped file they were read from are given back, so the resident weights stay one copy. Their
// products then run the panel GEMV / GEMM (one fused-multiply-add chain per output: faster GEMMs,
// the same bits for the parallel pass and the recurrent step, for a batch row and a row alone).
//
// Left row-major: a head tied to the embedding table (the table stays, and packing would hold the
// matrix twice); bf16 matrices when `precision` is Precision::kBf16 and the CPU has the AVX-512
// BF16 dot product (kernels/matmul.h matmul_bf16_inputs reads rows); every matrix when the kernels
// are the scalar set (the chains' std::fma is a library call there); int8 codes and `.rwkvq`
// packed matrices (not dense).
//
// Thread-safety: runs on a model being built, before it is shared.
#pragma once

#include <cstdint>

#include "kernels/thread_pool.h"
#include "model/model_impl.h"
#include "wick/model.h"

namespace wick::model {

// Returns the number of parameters packed.
uint64_t pack_model_panels(Model::Impl& impl, Precision precision, kernels::ThreadPool& pool);

}  // namespace wick::model
