// The attention of an RWKV-X attention block over its KV cache (docs/rwkvx.md §4.2 and §6.5):
// which cached keys each query sees (`full` or `moba`) and the softmax attention over them.
// Every query row is computed by one function of (its q, the cache, the options), so the parallel
// pass, a chunked pass and the recurrent step give bit-identical rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"
#include "wick/model.h"
#include "wick/state.h"

namespace wick::model {

// Attention head size of RWKV-X attention blocks (fixed by the architecture; H_a = C / 64).
constexpr int kAttentionHeadSize = 64;

// A half-open range of cache positions [begin, end).
struct KeyRange {
  int64_t begin = 0, end = 0;
};

// The keys a query at position `pos` attends to, in ascending position order, as ranges. `q` is
// its C-vector of queries; `block_means` [n_blocks, C] the mean keys of the complete blocks of the
// cache (at least pos / B of them); `head` selects the head for MobaScope::kPerHead (ignored for
// kShared and kFull). `full`: [0, pos]. `moba`: the current block [B·⌊pos/B⌋, pos] plus the
// top-n complete past blocks by score q·mean (n = K, or K - 1), ties to the lower block index;
// every past block when there are at most n.
std::vector<KeyRange> attention_key_ranges(const AttentionOptions& options, const float* q,
                                           const float* block_means, int64_t pos, int64_t C,
                                           int head);

// Brings state.kv_block_means(j) up to date for block size B: the mean key of every complete
// block of B cached rows (sum in position order, then divided by B). Stale means (another B) are
// recomputed.
void update_block_means(State& state, int j, int64_t B);

// y[t] = attention of query row t (position pos0 + t) over attention block j's cache, which
// already holds the rows up to pos0 + T - 1. q, y: [T, C] row-major. Heads in parallel.
void attend_rows(State& state, int j, const AttentionOptions& options, const float* q, int64_t T,
                 int64_t pos0, int64_t C, float* y, kernels::ThreadPool& pool);

}  // namespace wick::model
