// Perplexity and KL divergence of a model on a text: the evaluation protocol of
// docs/rwkvq-format.md §4 and docs/tasks.md §7.
//
// Protocol. The whole text is tokenised once into one id list, which is cut into consecutive,
// non-overlapping windows of `ctx` tokens starting at token 0. The final partial window (fewer
// than `ctx` tokens) is dropped - its tokens are not scored - and `max_windows` optionally keeps
// only the first windows. Each window of T tokens is scored on its own, from a zero state (no BOS
// token, nothing carried over from the previous window): one parallel pass over its first T - 1
// tokens gives logits [T - 1, V] in fp32, and position t (0 <= t <= T - 2) predicts token t + 1:
//   NLL_t = logsumexp(logits[t]) - logits[t][ids[t + 1]]        (natural log, in double)
// The first token of a window is never predicted. The mean is token-weighted over all scored
// positions of all windows, ppl = exp(mean NLL).
//
// KL to a reference: both models run the same windows; per position
//   KL_t(P_ref || Q) = sum_v p_v (log p_v - log q_v)             (nats, log-softmax in double)
// over the same positions the perplexity scores. Each window's KL is the mean over its positions;
// the reported KL is the mean over windows, with a 95 % confidence interval from a bootstrap over
// windows (the per-window KL values are paired differences of the two models on the same
// window, so a resample of windows is a paired resample).
//
// Units: NLL and KL in nats per token; counts in tokens (positions) and windows.
// Thread-safety: the functions keep no state between calls and only read the Model and Tokenizer.
// Their passes and their per-position arithmetic run on the kernel thread pool (wick/runtime.h),
// so concurrent calls are subject to the same rules as concurrent Model::forward() calls.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/errors.h"
#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick {

// A perplexity or KL computation produced a number that cannot be right: a non-finite mean NLL
// or KL (NaN / Inf logits, e.g. from damaged weights), or a mean NLL <= 1e-6 (a model that is
// certain of every next token is a sign of silently broken output, as rwkv-quant also guards).
class EvaluationError : public Error {
 public:
  using Error::Error;
};

// How a window's logits are computed. Both passes compute the same function (wick/model.h); the
// recurrent one exists to check that.
enum class ScoringPass {
  kParallel,   // Model::forward(window[0..T-1), zero state, all_positions = true)
  kRecurrent,  // Model::step for each of window[0..T-1) in turn, from a zero state
};

struct WindowOptions {
  int ctx = 512;            // tokens per window, >= 2 (ctx - 1 positions are scored per window)
  int64_t max_windows = 0;  // keep only the first windows, >= 0; 0 = off (every full window)
};

// Cuts `ids` into the windows described above: floor(ids.size() / ctx) windows of exactly ctx
// tokens (the first max_windows of them when max_windows > 0); the tail is dropped.
// Throws InputError when ctx < 2, max_windows < 0, or the ids do not fill one window (the message
// gives both counts and says to use a shorter ctx or a longer text).
std::vector<std::vector<int32_t>> cut_windows(std::span<const int32_t> ids,
                                              const WindowOptions& options);

// Called after each window with the windows done so far and the total (1..total); from the thread
// that called the evaluation function. Must not throw.
using WindowProgress = std::function<void(int64_t done, int64_t total)>;

struct PerplexityResult {
  double ppl = 0;             // exp(mean_nll)
  double mean_nll = 0;        // nats per scored token
  int64_t tokens_scored = 0;  // positions scored: sum over windows of (T - 1)
  int64_t windows = 0;        // windows evaluated
};

// Perplexity of `model` over pre-cut windows (each one independent, of any length >= 2; the
// windows of cut_windows() or a pre-tokenised corpus such as rwkv-quant's [N, T] sequences).
// Throws InputError for no window, a window of fewer than 2 tokens or a token id outside
// [0, V) (checked for every token, the last one included), and EvaluationError for a
// non-finite mean NLL or one <= 1e-6. With `start` (not owned, read only) every window starts
// from a copy of *start instead of a zero state (e.g. a state-tuned initial state,
// wick/tuned_state.h); a state of another geometry throws InputError.
PerplexityResult perplexity(const Model& model, std::span<const std::vector<int32_t>> windows,
                            ScoringPass pass = ScoringPass::kParallel,
                            const WindowProgress& progress = {}, const State* start = nullptr);

// Tokenises `text` once with `tokenizer`, cuts it with cut_windows() and computes perplexity().
// Throws what those throw, plus what Tokenizer::encode throws (InputError: e.g. invalid UTF-8 for
// a BPE tokenizer). The tokenizer's ids must fit the model (check_tokenizer_fits).
PerplexityResult perplexity(const Model& model, const Tokenizer& tokenizer, std::string_view text,
                            const WindowOptions& options, ScoringPass pass = ScoringPass::kParallel,
                            const WindowProgress& progress = {});

struct KlOptions {
  int bootstrap_resamples = 20000;  // resamples of the windows for the CI, >= 1
  uint64_t seed = 0;                // SplitMix64 seed (wick/rng.h) of the resampling
  double ci_level = 0.95;           // central interval, in (0, 1): percentiles 2.5 / 97.5
};

// Mean KL over the positions [begin, end) of every window (positions count from 0 at each
// window's first scored position).
struct KlBucket {
  int64_t begin = 0, end = 0;
  double mean_kl = 0;     // nats per token, mean over every position in the bucket (all windows)
  int64_t positions = 0;  // positions that fell into the bucket
};

struct KlResult {
  double mean_kl = 0;              // mean over windows of each window's mean KL, nats per token
  double ci_low = 0, ci_high = 0;  // bootstrap percentile interval of mean_kl (KlOptions)
  std::vector<double> window_kl;   // [windows] mean KL of each window, in window order
  // Buckets [0,64), [64,128), [128,256), [256,512), then doubling ([512,1024), ...) as far as
  // the longest window reaches; a bucket with no position is left out. Growth with position is
  // error accumulating in the recurrent state.
  std::vector<KlBucket> buckets;
  double top1_agreement = 0;  // fraction of positions where both argmaxes agree (ties: lowest id)
  int64_t positions = 0;      // positions compared: sum over windows of (T - 1)
  int64_t windows = 0;
};

// KL(P_reference || Q_model) over pre-cut windows, both models from a zero state per window
// through the parallel pass. The bootstrap draws `bootstrap_resamples` samples of n windows with
// replacement (index = high 64 bits of next() * n, SplitMix64 seeded with `seed`), takes each
// sample's mean and reports the percentiles (1 - ci_level)/2 and (1 + ci_level)/2 of those means,
// linearly interpolated between order statistics (numpy's default). A model compared with itself
// gives exactly 0 everywhere and top-1 agreement 1. KL is >= 0 up to rounding (a few 1e-17 when
// the two distributions are equal to double precision).
// Throws InputError for models of different vocabularies, no window, a window of fewer than 2
// tokens, an id outside [0, V), or KlOptions out of range; EvaluationError for a non-finite KL.
KlResult kl_divergence(const Model& reference, const Model& model,
                       std::span<const std::vector<int32_t>> windows, const KlOptions& options = {},
                       const WindowProgress& progress = {});

// Reads a text file for evaluation: its bytes verbatim (nothing stripped). Throws FileError when
// it cannot be read and InputError, naming the file and the byte offset and line of the first bad
// byte, when it is not valid UTF-8.
std::string read_evaluation_text(const std::string& path);

}  // namespace wick
