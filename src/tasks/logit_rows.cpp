#include "tasks/logit_rows.h"

#include <cmath>
#include <limits>

namespace wick::tasks {
namespace {

double row_max(const float* row, int64_t V) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t v = 0; v < V; ++v) {
    const double x = row[v];
    nan |= std::isnan(x);
    if (x > m) m = x;
  }
  return nan ? std::numeric_limits<double>::quiet_NaN() : m;
}

}  // namespace

double logsumexp(const float* row, int64_t V) {
  const double m = row_max(row, V);
  if (!std::isfinite(m)) return m;  // NaN or +-Inf logits: the caller reports a non-finite NLL
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(row[v]) - m);
  return m + std::log(s);
}

double nll(const float* row, int64_t V, int32_t target) {
  return logsumexp(row, V) - static_cast<double>(row[target]);
}

double kl(const float* p, const float* q, int64_t V, double* scratch) {
  const double mp = row_max(p, V), mq = row_max(q, V);
  if (!std::isfinite(mp) || !std::isfinite(mq)) return std::numeric_limits<double>::quiet_NaN();
  double sp = 0, sq = 0;
  for (int64_t v = 0; v < V; ++v) {
    scratch[v] = std::exp(static_cast<double>(p[v]) - mp);  // P_v * sp
    sp += scratch[v];
    sq += std::exp(static_cast<double>(q[v]) - mq);
  }
  const double lse_p = mp + std::log(sp), lse_q = mq + std::log(sq);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (scratch[v] == 0) continue;  // P_v == 0: the term is 0 (also when log Q_v is -inf)
    const double log_p = static_cast<double>(p[v]) - lse_p;
    const double log_q = static_cast<double>(q[v]) - lse_q;
    sum += scratch[v] * (log_p - log_q);
  }
  return sum / sp;
}

int64_t argmax(const float* row, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v) {
    if (row[v] > row[best] || (std::isnan(row[best]) && !std::isnan(row[v]))) best = v;
  }
  return best;
}

}  // namespace wick::tasks
