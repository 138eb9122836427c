// Pieces of the evaluation protocol (include/wick/perplexity.h) shared by the perplexity and the
// KL computation: window checks, the logits of one window, and the per-position loop over rows
// on the kernel thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "wick/model.h"
#include "wick/perplexity.h"

namespace wick::tasks {

// Throws InputError when `windows` is empty, a window has fewer than 2 tokens, or a token id is
// outside [0, vocab) - the last token of a window is only predicted, never fed to the model, so
// the model's own check does not see it.
void check_windows(std::span<const std::vector<int32_t>> windows, int64_t vocab);

// Logits [T - 1, V] fp32 of window[0..T-1) (T = window.size() >= 2) from a zero state (or a copy
// of *start): row t is the prediction for window[t + 1]. Throws InputError (from Model) for an id
// outside [0, V).
std::vector<float> window_logits(const Model& model, std::span<const int32_t> window,
                                 ScoringPass pass, const State* start = nullptr);

// Calls fn(row_begin, row_end, block) for contiguous ranges covering [0, rows), spread over the
// threads of `runtime` (under a lease: not from inside a pass); block < row_blocks(runtime, rows).
// Every row is handled by exactly one call, so results written per row do not depend on the
// thread count. fn must not throw.
int64_t row_blocks(const Runtime& runtime, int64_t rows);
void for_row_blocks(const Runtime& runtime, int64_t rows,
                    const std::function<void(int64_t, int64_t, int64_t)>& fn);

}  // namespace wick::tasks
