// Perplexity (include/wick/perplexity.h; docs/rwkvq-format.md §4, docs/tasks.md §7).
#include "tasks/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/thread_pool.h"
#include "model/state_geometry.h"
#include "runtime/runtime_impl.h"
#include "tasks/logit_rows.h"
#include "wick/errors.h"
#include "wick/runtime.h"

namespace wick {
namespace tasks {

void check_windows(std::span<const std::vector<int32_t>> windows, int64_t vocab) {
  if (windows.empty()) throw InputError("evaluation: no window to score");
  for (size_t i = 0; i < windows.size(); ++i) {
    if (windows[i].size() < 2) {
      throw InputError(fmt::format(
          "evaluation: window {} has {} token(s); a window needs at least 2 (a token and the one "
          "it predicts)",
          i, windows[i].size()));
    }
    for (size_t t = 0; t < windows[i].size(); ++t) {
      const int32_t id = windows[i][t];
      if (id < 0 || id >= vocab) {
        throw InputError(fmt::format(
            "evaluation: window {}, position {}: token id {} is outside the model's vocabulary "
            "[0, {})",
            i, t, id, vocab));
      }
    }
  }
}

std::vector<float> window_logits(const Model& model, std::span<const int32_t> window,
                                 ScoringPass pass, const State* start) {
  const std::span<const int32_t> inputs = window.first(window.size() - 1);
  State state = start ? *start : model.new_state();
  if (pass == ScoringPass::kParallel) return model.forward(inputs, state, /*all_positions=*/true);
  std::vector<float> logits;
  logits.reserve(inputs.size() * static_cast<size_t>(model.geometry().vocab));
  for (const int32_t id : inputs) {
    const std::vector<float> row = model.step(id, state);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

int64_t row_blocks(const Runtime& runtime, int64_t rows) {
  // A few blocks per thread balance the load on a shared machine; contiguous rows keep each
  // block's logits in one stretch of memory.
  return std::max<int64_t>(1, std::min<int64_t>(rows, 4 * int64_t{runtime.threads()}));
}

void for_row_blocks(const Runtime& runtime, int64_t rows,
                    const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int64_t n = row_blocks(runtime, rows);
  RuntimeLease lease(runtime);
  kernels::parallel_for(lease.pool(), n,
                        [&](int64_t b) { fn(rows * b / n, rows * (b + 1) / n, b); });
}

}  // namespace tasks

std::vector<std::vector<int32_t>> cut_windows(std::span<const int32_t> ids,
                                              const WindowOptions& options) {
  if (options.ctx < 2) {
    throw InputError(
        "the context (ctx) must be at least 2 tokens (one to read, one to predict); "
        "found " +
        std::to_string(options.ctx));
  }
  if (options.max_windows < 0) {
    throw InputError("max_windows must be >= 0 (0 = every window); found " +
                     std::to_string(options.max_windows));
  }
  const size_t ctx = static_cast<size_t>(options.ctx);
  size_t n = ids.size() / ctx;
  if (n == 0) {
    const std::string advice =
        ids.size() >= 2
            ? fmt::format("use a shorter context (ctx <= {}) or a longer text", ids.size())
            : std::string("use a longer text");
    throw InputError(
        fmt::format("the text gives {} token(s), fewer than one window of ctx = {} "
                    "tokens; {}",
                    ids.size(), ctx, advice));
  }
  if (options.max_windows > 0) n = std::min(n, static_cast<size_t>(options.max_windows));
  std::vector<std::vector<int32_t>> windows(n);
  for (size_t w = 0; w < n; ++w)
    windows[w].assign(ids.begin() + w * ctx, ids.begin() + (w + 1) * ctx);
  return windows;
}

PerplexityResult perplexity(const Model& model, std::span<const std::vector<int32_t>> windows,
                            ScoringPass pass, const WindowProgress& progress, const State* start) {
  const int64_t V = model.geometry().vocab;
  tasks::check_windows(windows, V);
  if (start) check_state_fits(*start, model.geometry(), "perplexity's initial state");
  double total_nll = 0;
  int64_t scored = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::vector<int32_t>& ids = windows[w];
    const std::vector<float> logits = tasks::window_logits(model, ids, pass, start);
    const int64_t rows = static_cast<int64_t>(ids.size()) - 1;
    std::vector<double> nll(static_cast<size_t>(rows));
    tasks::for_row_blocks(*model.runtime(), rows, [&](int64_t r0, int64_t r1, int64_t) {
      for (int64_t t = r0; t < r1; ++t) nll[t] = tasks::nll(logits.data() + t * V, V, ids[t + 1]);
    });
    for (const double x : nll) total_nll += x;  // fixed order: independent of the thread count
    scored += rows;
    if (progress) progress(static_cast<int64_t>(w) + 1, static_cast<int64_t>(windows.size()));
  }
  PerplexityResult r;
  r.mean_nll = total_nll / static_cast<double>(scored);
  r.ppl = std::exp(r.mean_nll);
  r.tokens_scored = scored;
  r.windows = static_cast<int64_t>(windows.size());
  if (!std::isfinite(r.mean_nll)) {
    throw EvaluationError(fmt::format(
        "perplexity: the mean negative log-likelihood is not finite ({}): the model produced NaN "
        "or infinite logits; check the weights",
        r.mean_nll));
  }
  if (r.mean_nll <= 1e-6) {
    throw EvaluationError(fmt::format(
        "perplexity: the mean negative log-likelihood is {:.3g} nats/token (<= 1e-6): a model "
        "certain of every token means broken output, not a perfect model",
        r.mean_nll));
  }
  return r;
}

PerplexityResult perplexity(const Model& model, const Tokenizer& tokenizer, std::string_view text,
                            const WindowOptions& options, ScoringPass pass,
                            const WindowProgress& progress) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  const std::vector<std::vector<int32_t>> windows = cut_windows(ids, options);
  return perplexity(model, windows, pass, progress);
}

}  // namespace wick
