// KL divergence of a model to a reference (include/wick/perplexity.h; docs/rwkvq-format.md §4).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tasks/bootstrap.h"
#include "tasks/logit_rows.h"
#include "tasks/perplexity.h"
#include "wick/errors.h"

namespace wick {
namespace {

// Bucket k covers positions [begin_k, end_k): [0,64), [64,128), then doubling.
int bucket_of(int64_t position) {
  int k = 0;
  for (int64_t end = 64; position >= end; end *= 2) ++k;
  return k;
}
KlBucket bucket_bounds(int k) {
  KlBucket b;
  b.begin = k == 0 ? 0 : int64_t{32} << k;
  b.end = int64_t{64} << k;
  return b;
}

void check_options(const Model& reference, const Model& model, const KlOptions& o) {
  if (reference.geometry().vocab != model.geometry().vocab) {
    throw InputError(fmt::format(
        "KL: the reference ({}) has a vocabulary of {} tokens and the model ({}) one of {}; KL "
        "compares next-token distributions, so both must share one vocabulary",
        reference.info().source, reference.geometry().vocab, model.info().source,
        model.geometry().vocab));
  }
  if (o.bootstrap_resamples < 1) {
    throw InputError(
        fmt::format("KL: bootstrap_resamples must be >= 1; found {}", o.bootstrap_resamples));
  }
  if (!(o.ci_level > 0 && o.ci_level < 1)) {
    throw InputError(fmt::format("KL: ci_level must be in (0, 1); found {}", o.ci_level));
  }
}

}  // namespace

KlResult kl_divergence(const Model& reference, const Model& model,
                       std::span<const std::vector<int32_t>> windows, const KlOptions& options,
                       const WindowProgress& progress) {
  check_options(reference, model, options);
  const int64_t V = model.geometry().vocab;
  tasks::check_windows(windows, V);
  KlResult r;
  std::vector<double> bucket_sum;
  std::vector<int64_t> bucket_count;
  int64_t agree = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::vector<int32_t>& ids = windows[w];
    const std::vector<float> p = tasks::window_logits(reference, ids, ScoringPass::kParallel);
    const std::vector<float> q = tasks::window_logits(model, ids, ScoringPass::kParallel);
    const int64_t rows = static_cast<int64_t>(ids.size()) - 1;
    std::vector<double> kl(static_cast<size_t>(rows));
    std::vector<char> same_top1(static_cast<size_t>(rows));
    std::vector<double> scratch(static_cast<size_t>(tasks::row_blocks(*model.runtime(), rows) * V));
    tasks::for_row_blocks(*model.runtime(), rows, [&](int64_t r0, int64_t r1, int64_t block) {
      for (int64_t t = r0; t < r1; ++t) {
        const float* pt = p.data() + t * V;
        const float* qt = q.data() + t * V;
        kl[t] = tasks::kl(pt, qt, V, scratch.data() + block * V);
        same_top1[t] = tasks::argmax(pt, V) == tasks::argmax(qt, V);
      }
    });
    // Sums in position order: the result does not depend on the thread count.
    double window_sum = 0;
    for (int64_t t = 0; t < rows; ++t) {
      window_sum += kl[t];
      agree += same_top1[t];
      const size_t k = static_cast<size_t>(bucket_of(t));
      if (k >= bucket_sum.size()) {
        bucket_sum.resize(k + 1, 0.0);
        bucket_count.resize(k + 1, 0);
      }
      bucket_sum[k] += kl[t];
      bucket_count[k] += 1;
    }
    r.window_kl.push_back(window_sum / static_cast<double>(rows));
    r.positions += rows;
    if (progress) progress(static_cast<int64_t>(w) + 1, static_cast<int64_t>(windows.size()));
  }
  r.windows = static_cast<int64_t>(windows.size());
  double sum = 0;
  for (const double x : r.window_kl) sum += x;
  r.mean_kl = sum / static_cast<double>(r.windows);
  if (!std::isfinite(r.mean_kl)) {
    throw EvaluationError(fmt::format(
        "KL: the mean KL divergence is not finite ({}): a model produced NaN or infinite logits, "
        "or the model gives probability 0 to a token the reference does not; check the weights",
        r.mean_kl));
  }
  const tasks::Interval ci = tasks::bootstrap_mean_interval(
      r.window_kl, options.bootstrap_resamples, options.seed, options.ci_level);
  r.ci_low = ci.low;
  r.ci_high = ci.high;
  for (size_t k = 0; k < bucket_sum.size(); ++k) {
    if (bucket_count[k] == 0) continue;
    KlBucket b = bucket_bounds(static_cast<int>(k));
    b.positions = bucket_count[k];
    b.mean_kl = bucket_sum[k] / static_cast<double>(bucket_count[k]);
    r.buckets.push_back(b);
  }
  r.top1_agreement = static_cast<double>(agree) / static_cast<double>(r.positions);
  return r;
}

}  // namespace wick
