#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>

#include "kernels/attention_kernels.h"
#include "kernels/dot.h"
#include "kernels/thread_pool.h"

namespace wick::model {
namespace {

// Softmax attention of one head: out[n] = Σ_j softmax_j(q·k_j / 8) v_j[n] over the key ranges,
// in position order. `k`, `v` point at the head's first channel of cache row 0; rows are C apart.
void attend_head(const float* q, const float* k, const float* v, int64_t C,
                 const std::vector<KeyRange>& ranges, kernels::Arena& arena, float* out) {
  const kernels::AttentionKernels& ak = kernels::attention_kernels();
  constexpr int N = kAttentionHeadSize;
  static_assert(N == kernels::kAttentionHead);
  const float scale = 1.f / std::sqrt(static_cast<float>(N));
  int64_t n_keys = 0;
  for (const KeyRange& r : ranges) n_keys += r.end - r.begin;
  float* scores = arena.get<float>(static_cast<size_t>(n_keys), kernels::Arena::kBlock0);
  int64_t i = 0;
  for (const KeyRange& r : ranges) {
    ak.scores(q, k, static_cast<size_t>(C), r.begin, r.end, scale, scores + i);
    i += r.end - r.begin;
  }
  const float max_score = *std::max_element(scores, scores + n_keys);
  float sum = 0.f;
  for (int64_t s = 0; s < n_keys; ++s) {
    scores[s] = std::exp(scores[s] - max_score);
    sum += scores[s];
  }
  float acc[N] = {};
  i = 0;
  for (const KeyRange& r : ranges) {
    ak.accumulate(scores + i, v, static_cast<size_t>(C), r.begin, r.end, acc);
    i += r.end - r.begin;
  }
  const float inv = 1.f / sum;
  for (int n = 0; n < N; ++n) out[n] = acc[n] * inv;
}

}  // namespace

std::vector<KeyRange> attention_key_ranges(const AttentionOptions& o, const float* q,
                                           const float* block_means, int64_t pos, int64_t C,
                                           int head) {
  if (o.mode == AttentionMode::kFull) return {KeyRange{0, pos + 1}};
  const int64_t B = o.moba_block;
  const int64_t current = pos / B;  // blocks [0, current) are complete and in the past
  const int64_t n_past = o.moba_past_k_minus_1 ? o.moba_topk - 1 : o.moba_topk;
  std::vector<int64_t> chosen;
  if (current <= n_past) {
    chosen.resize(static_cast<size_t>(current));
    std::iota(chosen.begin(), chosen.end(), int64_t{0});
  } else {
    const kernels::DotKernels& dk = kernels::dot_kernels();
    const bool shared = o.moba_scope == MobaScope::kShared;
    const int64_t off = shared ? 0 : static_cast<int64_t>(head) * kAttentionHeadSize;
    const int64_t len = shared ? C : kAttentionHeadSize;
    std::vector<std::pair<float, int64_t>> scored(static_cast<size_t>(current));
    for (int64_t b = 0; b < current; ++b)
      scored[b] = {dk.f32(block_means + b * C + off, q + off, static_cast<size_t>(len)), b};
    // Highest score first; equal scores: the lower block index.
    std::partial_sort(scored.begin(), scored.begin() + n_past, scored.end(),
                      [](const auto& x, const auto& y) {
                        return x.first > y.first || (x.first == y.first && x.second < y.second);
                      });
    for (int64_t i = 0; i < n_past; ++i) chosen.push_back(scored[i].second);
    std::sort(chosen.begin(), chosen.end());
  }
  std::vector<KeyRange> ranges;
  for (int64_t b : chosen) {
    if (!ranges.empty() && ranges.back().end == b * B) {
      ranges.back().end += B;
    } else {
      ranges.push_back(KeyRange{b * B, (b + 1) * B});
    }
  }
  if (!ranges.empty() && ranges.back().end == current * B) {
    ranges.back().end = pos + 1;
  } else {
    ranges.push_back(KeyRange{current * B, pos + 1});
  }
  return ranges;
}

void update_block_means(State& state, int j, int64_t B) {
  const int64_t C = state.n_embd();
  if (state.kv_block_size() != B) {
    for (int b = 0; b < state.n_attn(); ++b) state.kv_block_means(b).clear();
    state.kv_block_size() = B;
  }
  std::vector<float>& means = state.kv_block_means(j);
  const int64_t have = static_cast<int64_t>(means.size()) / C;
  const int64_t need = state.kv_length() / B;
  if (need <= have) return;
  means.resize(static_cast<size_t>(need * C));
  const float* k = state.k_cache(j);
  for (int64_t b = have; b < need; ++b) {
    float* m = means.data() + b * C;
    std::fill(m, m + C, 0.f);
    for (int64_t p = b * B; p < (b + 1) * B; ++p)
      for (int64_t c = 0; c < C; ++c) m[c] += k[p * C + c];
    const float n = static_cast<float>(B);
    for (int64_t c = 0; c < C; ++c) m[c] /= n;
  }
}

void attend_rows(State& state, int j, const AttentionOptions& options, const float* q, int64_t T,
                 int64_t pos0, int64_t C, float* y, kernels::ThreadPool& pool) {
  const int H = static_cast<int>(C / kAttentionHeadSize);
  if (options.mode == AttentionMode::kMoba) update_block_means(state, j, options.moba_block);
  const float* means = state.kv_block_means(j).data();
  const bool per_head =
      options.mode == AttentionMode::kMoba && options.moba_scope == MobaScope::kPerHead;
  // One key set per row (shared scope, full) or per row and head (per-head scope).
  std::vector<std::vector<KeyRange>> ranges(static_cast<size_t>(per_head ? 0 : T));
  if (!per_head) {
    for (int64_t t = 0; t < T; ++t)
      ranges[t] = attention_key_ranges(options, q + t * C, means, pos0 + t, C, 0);
  }
  const float* k = state.k_cache(j);
  const float* v = state.v_cache(j);
  // Per-head scope: every (row, head) key set is chosen here, so the jobs below allocate nothing
  // but their scratch, and an exception (out of memory) cannot escape a pool job.
  std::vector<std::vector<KeyRange>> head_ranges;
  if (per_head) {
    head_ranges.resize(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        head_ranges[t * H + h] = attention_key_ranges(options, q + t * C, means, pos0 + t, C, h);
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  pool.run(T * H, [&](int64_t job, kernels::Arena& arena) {
    const int64_t t = job / H;
    const int h = static_cast<int>(job % H);
    try {
      attend_head(q + t * C + h * kAttentionHeadSize, k + h * kAttentionHeadSize,
                  v + h * kAttentionHeadSize, C, per_head ? head_ranges[job] : ranges[t], arena,
                  y + t * C + h * kAttentionHeadSize);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace wick::model
