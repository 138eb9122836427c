// Per-position arithmetic of the evaluation protocol (docs/rwkvq-format.md §4) on rows of fp32
// logits [V], all in double: log-sum-exp, negative log-likelihood of a target, KL divergence of
// two rows' softmaxes, argmax. Pure functions; safe from any thread.
//
// Non-finite logits are not checked here: they make the results non-finite (NaN or Inf), which
// the callers turn into one EvaluationError for the whole run.
#pragma once

#include <cstdint>

namespace wick::tasks {

// log(sum_v exp(row[v])) over row[0..V), V >= 1, computed as m + log(sum exp(row[v] - m)) with
// m = max(row) so that no exp overflows.
double logsumexp(const float* row, int64_t V);

// logsumexp(row) - row[target] (nats); target in [0, V) (precondition).
double nll(const float* row, int64_t V, int32_t target);

// KL(softmax(p) || softmax(q)) = sum_v P_v (log P_v - log Q_v) in nats, log-softmax in double.
// Terms with P_v == 0 (exp underflow) contribute nothing. `scratch` holds V doubles (overwritten).
// Identical rows give exactly 0.
double kl(const float* p, const float* q, int64_t V, double* scratch);

// Index of the largest logit; ties go to the lowest index. NaN entries are never chosen unless
// every entry is NaN (then 0).
int64_t argmax(const float* row, int64_t V);

}  // namespace wick::tasks
