// Token samplers (docs/tasks.md §1; ChatRWKV-compatible mode §1.6 after BlinkDL/ChatRWKV
// rwkv_pip_package/src/rwkv/utils.py, PIPELINE.sample_logits / PIPELINE.generate).
//
// Both samplers are defined over the full order of the ids (value descending, ties by ascending id)
// and f32 running sums along it. Sorting all V = 65536 ids per token costs milliseconds, so the
// order is materialised lazily (LazyOrder), and the result is still bit for bit that of the full
// stable sort (tests/generate/test_sampler.cpp compares the two pick for pick):
//
//   * every id gets a bin by its sort value (1/16 nat of logit below the maximum, or 1/16 octave
//     of probability); a lower bin precedes a higher one in the order, so sorting each bin on its
//     own gives exactly the full order;
//   * only the top bins are scattered into place up front, only the bins a walk or the draw needs
//     id by id are sorted;
//   * a bin the running sum passes over whole needs no order at all when its contribution cannot
//     depend on it: inside one binade of the sum, every f32 addition rounds to a multiple of the
//     same ulp, so the sum after the bin is acc + sum(round(w / ulp)) * ulp in any order (unless a
//     w / ulp ends in exactly .5, or the sum would leave the binade or reach the target inside the
//     bin); in the tail the sums come from one table over all ids, without placing them;
//   * once every remaining weight is below half an ulp of the sum, nothing after it can change the
//     sum: the walk stops ("inert tail").
//
// The passes over all V ids (copy, max, exp and sum, bins) are branch-free loops that vectorise.
#include "wick/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "kernels/sampler_loops.h"
#include "kernels/sampler_math.h"
#include "wick/errors.h"

namespace wick {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The passes over all V ids: the kernels' sampler loops (kernels/sampler_loops.h) for the
// instruction set in use, and their scalar numerics (kernels/sampler_math.h).
using kernels::exp_clamped;
using kernels::prob_of;
constexpr int kBins = kernels::kSamplerBins;  // bins of the lazy order; the last takes the rest

const kernels::SamplerLoops& loops() {
  return kernels::sampler_loops();
}
void shift_clamp(const float* z, size_t n, float max, float* e) {
  loops().shift_clamp(z, n, max, e);
}
void shift_clamp_bin(const float* z, size_t n, float max, float* e, uint16_t* bin) {
  loops().shift_clamp_bin(z, n, max, e, bin);
}
double exp_in_place_sum(float* e, size_t n) {
  return loops().exp_in_place_sum(e, n);
}
void sanitize_copy(const float* in, float* out, size_t n) {
  loops().sanitize_copy(in, out, n);
}
void probs_and_bins(const float* e, size_t n, double inv_sum, float* p, uint16_t* bin) {
  loops().probs_and_bins(e, n, inv_sum, p, bin);
}
size_t collect_below(const uint16_t* bin, size_t n, uint32_t until, uint32_t* out) {
  return loops().collect_below(bin, n, until, out);
}
size_t collect_equal(const uint16_t* bin, size_t n, uint16_t value, uint32_t* out) {
  return loops().collect_equal(bin, n, value, out);
}
void units_of(bool from_prob, const float* prob, const float* ex, double inv_sum, size_t n,
              double per_ulp, uint32_t* units) {
  loops().units_of(from_prob, prob, ex, inv_sum, n, per_ulp, units);
}

// e[i] = exp(z[i] - max) for every i (see softmax() in the header); returns their sum. `max` is
// the largest z (> -inf). e may alias z. With `bin`, also the logit bins (shift_clamp_bin).
double exp_shifted(const float* z, size_t n, float max, float* e, uint16_t* bin = nullptr) {
  if (max == kInf) {
    for (size_t i = 0; i < n; ++i) e[i] = z[i] == kInf ? 1.f : 0.f;
    if (bin) {
      for (size_t i = 0; i < n; ++i) bin[i] = z[i] == kInf ? 0 : kBins - 1;
    }
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += e[i];
    return sum;
  }
  // Separate loops for the clamp (which also maps -inf and NaN to -100) and the exp: each
  // vectorises, a fused one does not.
  if (bin) {
    shift_clamp_bin(z, n, max, e, bin);
  } else {
    shift_clamp(z, n, max, e);
  }
  return exp_in_place_sum(e, n);
}

// Largest value of x[0, n), NaN ignored (-inf if none).
float max_of(const float* x, size_t n) {
  return loops().max_of(x, n);
}

// x[i] /= divisor (> 0) in place, then the largest quotient (the quotient of the max).
float divide_and_max(float* x, size_t n, float divisor) {
  return loops().divide_and_max(x, n, divisor);
}

// Half the distance from positive normal `acc` to the next float up: fl(acc + w) == acc for every
// 0 <= w < half_ulp(acc).
inline float half_ulp(float acc) {
  return (std::nextafter(acc, kInf) - acc) * 0.5f;
}

// ---------------------------------------------------------------------------------------------
// The lazily sorted order.

// One id in the order: `key` sorts ascending as (value descending, id ascending); `p` is the id's
// probability (the walks' weights are functions of it).
struct Entry {
  uint64_t key;
  float p;
};

inline int32_t id_of(const Entry& e) {
  return static_cast<int32_t>(static_cast<uint32_t>(e.key));
}

inline uint64_t order_key(float value, uint32_t id) {
  uint32_t u = std::bit_cast<uint32_t>(value + 0.0f);  // -0 -> +0: equal values tie
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);      // now ascending with the value
  return (static_cast<uint64_t>(~u) << 32) | id;
}

// exp(-b / 16) for b in [0, kBins]: bounds of the logit bins.
double exp_bin_edge(int b) {
  static const std::vector<double> table = [] {
    std::vector<double> t(kBins + 1);
    for (int i = 0; i <= kBins; ++i) t[i] = std::exp(-i / 16.0);
    return t;
  }();
  return table[b];
}

// A walk's visit of one bin, replayed by the draw.
struct Step {
  int bin;
  uint32_t first;  // position (= index in entries) of the bin's first id
  uint32_t count;  // positions walked in this bin
  float acc_in;    // running sum before the bin
  float acc_out;   // running sum after `count` positions
  bool skipped;    // summed without sorting (the bin may still be unsorted)
};

struct Walk {
  size_t count = 0;      // positions walked
  float acc = 0.f;       // f32 running sum after them
  bool reached = false;  // stopped because acc >= target (at position count - 1)
  bool inert = false;    // stopped because no later weight can change acc
};

// The exponent k of a positive normal acc: acc in [2^(k-1), 2^k), ulp(acc) = 2^(k-24).
inline int binade(float acc) {
  int k = 0;
  std::frexp(acc, &k);
  return k;
}

// The order of one selection, materialised as far as the walks need it. The ids are binned by
// their sort value (the caller fills bin_buffer()); a lower bin precedes a higher one, so the
// order is the bins one after the other, each sorted by key. Positions are indices into entries_:
// bin b holds positions [start_[b], start_[b + 1]).
//
//   * begin() places (scatters into entries_) the top bins, [0, horizon_): usually a small part.
//   * The other bins (the tail) are placed only if a walk or the draw needs their ids. A walk
//     that reaches the tail first counts it and tabulates, per bin, the sum of round(w / ulp)
//     (build_table): a bin passed over whole needs no more.
//   * A bin is sorted only when a walk or the draw needs its ids one by one.
class LazyOrder {
 public:
  enum class Kind {
    kLogit,  // order by a logit z (standard); bins of 1/16 nat below the maximum
    kProb,   // order by the probability p (chatrwkv); bins of 1/16 octave below 1
  };

  // The caller fills bin_buffer(n)[i] with id i's bin (shift_clamp_bin / probs_and_bins) before
  // begin().
  uint16_t* bin_buffer(size_t n) {
    bin_.resize(n);
    return bin_.data();
  }

  // Starts the order of one selection over n ids. kLogit: value = z, ex[i] = exp(z[i] - max),
  // p = prob_of(ex, inv_sum). kProb: value = prob = p.
  // Places the top bins up to the first bin where `count_needed` positions or an estimated mass
  // of `mass_needed` are reached, or below which every p is under `inert_p`: the top 2 nats (or
  // octaves) if they suffice, else the smallest horizon by a histogram of every bin.
  void begin(Kind kind, size_t n, const float* value, const float* ex, const float* prob,
             double inv_sum, size_t count_needed, double mass_needed, double inert_p) {
    kind_ = kind;
    n_ = n;
    value_ = value;
    ex_ = ex;
    prob_ = prob;
    inv_sum_ = inv_sum;
    entries_.resize(n);
    ids_.resize(n);
    start_.assign(kBins + 1, 0);
    placed_.assign(kBins, 0);
    sorted_.assign(kBins, 0);
    steps_.clear();
    tail_counted_ = false;
    table_binade_ = kNoTable;
    horizon_ = 32;
    size_t count = collect_below(bin_.data(), n, horizon_, ids_.data());
    if (!enough(count, count_needed, mass_needed, inert_p)) {
      horizon_ = plan_horizon(count_needed, mass_needed, inert_p);
      count = collect_below(bin_.data(), n, horizon_, ids_.data());
    }
    place(ids_.data(), count, 0, 0);
    std::fill(placed_.begin(), placed_.begin() + horizon_, 1);
  }

  // Upper bound of p over bins >= b (bins are monotone).
  double p_hi(int b) const {
    if (kind_ == Kind::kProb) return std::bit_cast<float>(0x3F800000u - (uint32_t(b) << 19));
    // p <= exp(-b/16) * inv_sum up to exp_clamped's and the roundings' error.
    return exp_bin_edge(b) * inv_sum_ * (1 + 1e-4);
  }

  // Lower bound of p inside bin b (planning estimate).
  double p_lo(int b) const {
    if (b >= kBins - 1) return 0;
    if (kind_ == Kind::kProb) return std::bit_cast<float>(0x3F800000u - (uint32_t(b + 1) << 19));
    return exp_bin_edge(b + 1) * inv_sum_ * (1 - 1e-4);
  }

  // Accumulates weight(p) in f32 along the order until `limit` positions, or until the sum
  // reaches `target` (acc >= target, checked after each addition), or until the rest of the
  // order cannot change the sum. bound(b) must bound weight(p) over bins >= b and not increase
  // with b. `tabulate` (only when weight(p) is p itself): a tail the walk reaches is tabulated
  // (build_table) instead of placed whole. Records the steps for draw().
  template <class Weight, class Bound>
  Walk walk(size_t limit, float target, Weight weight, Bound bound, bool tabulate) {
    steps_.clear();
    table_binade_ = kNoTable;  // a table holds one weight function's units: rebuild per walk
    Walk r;
    for (int b = 0; b < kBins && r.count < limit; ++b) {
      if (b == horizon_ && !tail_counted_) {
        if (r.acc > 0 && bound(b) < half_ulp(r.acc)) {
          r.inert = true;
          return r;
        }
        if (tabulate && r.acc > 0) {
          build_table(r.acc, /*count=*/true);
        } else {
          materialise_rest();
        }
      }
      const uint32_t first = start_[b];
      const uint32_t n = start_[b + 1] - first;
      if (n == 0) continue;
      if (r.acc > 0 && bound(b) < half_ulp(r.acc)) {
        r.inert = true;
        return r;
      }
      Step step{b, first, 0, r.acc, r.acc, false};
      if (r.acc > 0 && r.count + n <= limit) {
        std::optional<float> out;
        if (!placed_[b] && !tabulate) materialise_rest();
        if (placed_[b]) {
          out = skip_sum(b, r.acc, target, weight);
        } else {
          if (table_binade_ != binade(r.acc)) build_table(r.acc, /*count=*/false);
          out = table_sum(b, r.acc, target);
        }
        if (out) {
          step.count = n;
          step.acc_out = *out;
          step.skipped = true;
          steps_.push_back(step);
          r.acc = *out;
          r.count += n;
          continue;
        }
      }
      place_bin(b);
      sort_bin(b);
      for (uint32_t i = first; i < first + n; ++i) {
        r.acc += weight(entries_[i].p);
        ++r.count;
        ++step.count;
        if (r.acc >= target) r.reached = true;
        if (r.reached || r.count == limit) break;
      }
      step.acc_out = r.acc;
      steps_.push_back(step);
      if (r.reached) break;
    }
    return r;
  }

  // The first position of the last walk whose running sum exceeds u; -1 if none.
  template <class Weight>
  int32_t draw(float u, Weight weight) {
    for (const Step& step : steps_) {
      if (!(u < step.acc_out)) continue;
      place_bin(step.bin);
      sort_bin(step.bin);
      float acc = step.acc_in;
      for (uint32_t i = step.first; i < step.first + step.count; ++i) {
        acc += weight(entries_[i].p);
        if (u < acc) return id_of(entries_[i]);
      }
    }
    return -1;
  }

  // The id at the last position < kept whose weight is > 0; -1 if none. (Rarely needed: u at or
  // beyond the whole mass.)
  template <class Weight>
  int32_t last_positive(size_t kept, Weight weight) {
    materialise_rest();
    for (int b = kBins - 1; b >= 0; --b) {
      if (start_[b] >= kept || start_[b] == start_[b + 1]) continue;
      sort_bin(b);
      for (size_t i = std::min<size_t>(kept, start_[b + 1]); i-- > start_[b];) {
        if (weight(entries_[i].p) > 0) return id_of(entries_[i]);
      }
    }
    return -1;
  }

  // The entry at `pos`, which must lie in a bin the last walk sorted.
  const Entry& at(size_t pos) const { return entries_[pos]; }
  // One past the last position of the bin holding `pos` (a placed position).
  size_t bin_end(size_t pos) const {
    return *std::upper_bound(start_.begin(), start_.end(), static_cast<uint32_t>(pos));
  }

 private:
  static constexpr int kNoTable = std::numeric_limits<int>::min();

  float p_at(uint32_t i) const {
    return kind_ == Kind::kProb ? prob_[i] : prob_of(ex_[i], inv_sum_);
  }
  Entry entry_of(uint32_t i) const { return {order_key(value_[i], i), p_at(i)}; }

  // Whether the ids of bins [0, horizon_) (ids_[0, count)) meet begin()'s conditions.
  bool enough(size_t count, size_t count_needed, double mass_needed, double inert_p) {
    if (p_hi(horizon_) < inert_p || count >= count_needed) return true;
    std::fill(start_.begin(), start_.begin() + horizon_, 0);
    for (size_t k = 0; k < count; ++k) ++start_[bin_[ids_[k]]];
    double mass = 0;
    for (int b = 0; b < horizon_; ++b) mass += start_[b] * p_lo(b);
    return mass >= mass_needed;
  }

  // The smallest horizon whose bins reach count_needed ids or an estimated mass of
  // mass_needed, or below which every p is under inert_p (or kBins).
  int plan_horizon(size_t count_needed, double mass_needed, double inert_p) {
    // Four interleaved histograms: consecutive ids often share a bin, and one counter would
    // serialise the increments.
    std::array<std::array<uint32_t, kBins>, 4> counts{};
    const uint16_t* bin = bin_.data();
    size_t i = 0;
    for (; i + 4 <= n_; i += 4) {
      ++counts[0][bin[i]];
      ++counts[1][bin[i + 1]];
      ++counts[2][bin[i + 2]];
      ++counts[3][bin[i + 3]];
    }
    for (; i < n_; ++i) ++counts[0][bin[i]];
    size_t count = 0;
    double mass = 0;
    for (int b = 0; b < kBins; ++b) {
      const uint32_t c = counts[0][b] + counts[1][b] + counts[2][b] + counts[3][b];
      count += c;
      mass += c * p_lo(b);
      if (count >= count_needed || mass >= mass_needed ||
          (b + 1 < kBins && p_hi(b + 1) < inert_p)) {
        return b + 1;
      }
    }
    return kBins;
  }

  // Places ids[0, count), none of whose bins has a position yet, as bins laid out from
  // position `offset` on, starting with bin `from`.
  void place(const uint32_t* ids, size_t count, int from, uint32_t offset) {
    std::fill(start_.begin() + from, start_.end(), 0);
    for (size_t k = 0; k < count; ++k) ++start_[bin_[ids[k]] + 1];
    start_[from] = offset;
    for (int b = from; b < kBins; ++b) start_[b + 1] += start_[b];
    cursor_.assign(start_.begin(), start_.end() - 1);
    for (size_t k = 0; k < count; ++k) {
      const uint32_t i = ids[k];
      entries_[cursor_[bin_[i]]++] = entry_of(i);
    }
  }

  // Places one tail bin whose positions are known (a counted tail).
  void place_bin(int b) {
    if (placed_[b]) return;
    const size_t count = collect_equal(bin_.data(), n_, static_cast<uint16_t>(b), ids_.data());
    Entry* out = entries_.data() + start_[b];
    for (size_t k = 0; k < count; ++k) out[k] = entry_of(ids_[k]);
    placed_[b] = 1;
  }

  // Places every bin not placed yet.
  void materialise_rest() {
    if (!tail_counted_) {  // nothing of the tail is known: count and place it in one go
      size_t count = 0;
      for (size_t i = 0; i < n_; ++i) {
        if (bin_[i] >= horizon_) ids_[count++] = static_cast<uint32_t>(i);
      }
      place(ids_.data(), count, horizon_, start_[horizon_]);
      tail_counted_ = true;
    } else {
      cursor_.assign(start_.begin(), start_.end() - 1);
      for (size_t i = 0; i < n_; ++i) {
        const int b = bin_[i];
        if (!placed_[b]) entries_[cursor_[b]++] = entry_of(static_cast<uint32_t>(i));
      }
    }
    std::fill(placed_.begin(), placed_.end(), 1);
  }

  void sort_bin(int b) {
    if (sorted_[b]) return;
    std::sort(entries_.begin() + start_[b], entries_.begin() + start_[b + 1],
              [](const Entry& x, const Entry& y) { return x.key < y.key; });
    sorted_[b] = 1;
  }

  // The exact f32 running sum after adding the weights of bin b (whole) to `acc`, in any order:
  // acc lies in a binade [2^(k-1), 2^k) with ulp 2^(k-24); while the sum stays below 2^k,
  // fl(acc + w) = acc + round(w / ulp) * ulp, which does not depend on acc, unless w / ulp ends
  // in exactly .5 (ties go to the even neighbour, which depends on acc). So the bin need not be
  // sorted. Returns nullopt if a weight is such a tie, the sum would leave the binade, or it
  // would reach `target` inside the bin (then the walk needs the exact stop position).
  template <class Weight>
  std::optional<float> skip_sum(int b, float acc, float target, Weight weight) const {
    const double per_ulp = std::ldexp(1.0, 24 - binade(acc));
    double units = 0;
    for (uint32_t i = start_[b]; i < start_[b + 1]; ++i) {
      const double t = static_cast<double>(weight(entries_[i].p)) * per_ulp;  // exact
      const double rounded = static_cast<double>(static_cast<int64_t>(t + 0.5));
      if (rounded - t == 0.5) return std::nullopt;
      units += rounded;
    }
    return end_of(acc, units, target);
  }

  // skip_sum for an unplaced tail bin, from the table (a tie shows as too many units).
  std::optional<float> table_sum(int b, float acc, float target) const {
    return end_of(acc, table_units_[b], target);
  }

  // acc + units ulps, if that stays in acc's binade and below target.
  static std::optional<float> end_of(float acc, double units, float target) {
    const int k = binade(acc);
    const double end = static_cast<double>(acc) + std::ldexp(units, k - 24);  // exact
    if (end >= std::ldexp(1.0, k) || end >= static_cast<double>(target)) return std::nullopt;
    return static_cast<float>(end);
  }

  // For every tail bin: the units of skip_sum at acc's binade (units_of), for the weight p itself
  // (a walk tabulates only then); with `count`, also the bins' sizes, which give the tail its
  // positions. First every id's units (a loop that vectorises), then the sums per bin.
  void build_table(float acc, bool count) {
    table_binade_ = binade(acc);
    const double per_ulp = std::ldexp(1.0, 24 - table_binade_);
    units_.resize(n_);
    if (kind_ == Kind::kProb) {
      units_of(true, prob_, nullptr, 0, n_, per_ulp, units_.data());
    } else {
      units_of(false, nullptr, ex_, inv_sum_, n_, per_ulp, units_.data());
    }
    // Four interleaved tables keep consecutive increments independent.
    std::array<std::array<uint64_t, kBins>, 4> units{};
    std::array<std::array<uint32_t, kBins>, 4> sizes{};
    const uint16_t* bin = bin_.data();
    const uint32_t* u = units_.data();
    const size_t whole = n_ / 4 * 4;
    for (size_t i = 0; i < whole; i += 4) {
      for (int j = 0; j < 4; ++j) units[j][bin[i + j]] += u[i + j];
    }
    for (size_t i = whole; i < n_; ++i) units[0][bin[i]] += u[i];
    if (count) {
      for (size_t i = 0; i < whole; i += 4) {
        for (int j = 0; j < 4; ++j) ++sizes[j][bin[i + j]];
      }
      for (size_t i = whole; i < n_; ++i) ++sizes[0][bin[i]];
    }
    table_units_.assign(kBins, 0);
    for (int b = horizon_; b < kBins; ++b) {
      table_units_[b] = static_cast<double>(units[0][b] + units[1][b] + units[2][b] + units[3][b]);
      if (count) {
        start_[b + 1] = start_[b] + sizes[0][b] + sizes[1][b] + sizes[2][b] + sizes[3][b];
      }
    }
    if (count) tail_counted_ = true;
  }

  Kind kind_ = Kind::kLogit;
  size_t n_ = 0;
  const float* value_ = nullptr;
  const float* ex_ = nullptr;
  const float* prob_ = nullptr;
  double inv_sum_ = 0;
  int horizon_ = kBins;          // bins [0, horizon_) are placed by begin()
  bool tail_counted_ = false;    // start_ is known for the tail bins too
  int table_binade_ = kNoTable;  // binade of the table's units (kNoTable: none)
  std::vector<uint16_t> bin_;    // bin of each id
  std::vector<uint32_t> ids_;    // scratch: ids being placed
  std::vector<uint32_t>
      start_;  // kBins + 1 offsets: bin b holds positions [start_[b], start_[b+1])
  std::vector<uint32_t> cursor_;
  std::vector<uint8_t> placed_;  // per bin: its ids are in entries_
  std::vector<uint8_t> sorted_;  // per bin: ... and sorted
  std::vector<uint32_t> units_;  // scratch of build_table
  std::vector<double> table_units_;
  std::vector<Entry> entries_;  // entries_[pos]: the id at position pos once its bin is sorted
  std::vector<Step> steps_;
};

// ---------------------------------------------------------------------------------------------
// Configuration checks.

template <class T>
[[noreturn]] void bad_field(std::string_view field, std::string_view expected, T found) {
  throw InputError(fmt::format("sampling config: {} must be {}, got {}", field, expected, found));
}

void check_id(std::string_view field, int32_t id, int vocab) {
  if (id < 0 || (vocab > 0 && id >= vocab)) {
    throw InputError(fmt::format("sampling config: {} has id {}, expected an id in [0, {})", field,
                                 id, vocab > 0 ? fmt::format("{}", vocab) : "vocab"));
  }
}

// The estimated mass of the bins placed up front, for a walk to `target` over `limit` of n
// positions: a little beyond the target (the walk then stops in placed bins); without a target,
// everything up to the limit if there is one, else 0.6 (from there on the running sum is in
// [0.5, 1) and the walk through the tail needs one table of it).
double placed_mass(float target, size_t limit, size_t n) {
  if (target < 1) return target + 1e-3;
  return limit < n ? HUGE_VAL : 0.6;
}

// Nothing left to choose from `logits` (the model's, before any adjustment): when the model
// itself produced only non-finite values the message says so (NaN or inf in the weights or the
// state), else it blames the adjustments.
InputError no_candidate(std::span<const float> logits) {
  size_t nan = 0, pos_inf = 0, neg_inf = 0;
  for (float x : logits) {
    if (x != x)
      ++nan;
    else if (x == kInf)
      ++pos_inf;
    else if (x == -kInf)
      ++neg_inf;
  }
  if (nan + pos_inf + neg_inf == logits.size()) {
    return InputError(fmt::format(
        "sampler: the model produced non-finite logits (all {} are NaN or infinite: {} NaN, {} "
        "+inf, {} -inf), so there is no token to choose; expected finite logits. The weights or "
        "the loaded state hold NaN or inf: check the checkpoint and any --load-state file",
        logits.size(), nan, pos_inf, neg_inf));
  }
  return InputError(
      "sampler: every logit is -inf or NaN after logit_bias, banned_tokens and the penalties; "
      "there is no token to choose");
}

}  // namespace

// -----------------------------------------------------------------------------------------------

std::string_view sampler_mode_name(SamplerMode mode) {
  return mode == SamplerMode::kChatRwkv ? "chatrwkv" : "standard";
}

SamplerMode parse_sampler_mode(std::string_view name) {
  if (name == "standard") return SamplerMode::kStandard;
  if (name == "chatrwkv") return SamplerMode::kChatRwkv;
  throw InputError(fmt::format("unknown sampler '{}': expected 'standard' or 'chatrwkv'", name));
}

void SamplingConfig::validate(int vocab) const {
  const bool chat = mode == SamplerMode::kChatRwkv;
  if (!(temperature >= 0) || std::isinf(temperature)) {
    bad_field(
        "temperature",
        chat ? "finite and >= 0 (0 = only the most probable ids)" : "finite and >= 0 (0 = greedy)",
        temperature);
  }
  if (top_k < 0) bad_field("top_k", ">= 0 (0 = off)", top_k);
  if (chat ? !(top_p >= 0 && top_p <= 1) : !(top_p > 0 && top_p <= 1)) {
    bad_field("top_p", chat ? "in [0, 1] (1 = off)" : "in (0, 1] (1 = off)", top_p);
  }
  if (!(repetition_penalty > 0) || std::isinf(repetition_penalty)) {
    bad_field("repetition_penalty", "finite and > 0 (1 = off)", repetition_penalty);
  }
  if (chat && repetition_penalty != 1) {
    bad_field("repetition_penalty",
              "1 in the chatrwkv sampler (ChatRWKV has no CTRL penalty; use presence_penalty / "
              "frequency_penalty)",
              repetition_penalty);
  }
  if (!std::isfinite(presence_penalty)) bad_field("presence_penalty", "finite", presence_penalty);
  if (!std::isfinite(frequency_penalty)) {
    bad_field("frequency_penalty", "finite", frequency_penalty);
  }
  if (!(penalty_decay >= 0 && penalty_decay <= 1)) {
    bad_field("penalty_decay", "in [0, 1] (1 = no decay)", penalty_decay);
  }
  for (const auto& [id, bias] : logit_bias) {
    check_id("logit_bias", id, vocab);
    if (std::isnan(bias)) {
      throw InputError(
          fmt::format("sampling config: logit_bias for id {} must be a number, got NaN", id));
    }
  }
  for (int32_t id : banned_tokens) check_id("banned_tokens", id, vocab);
}

SamplingConfig SamplingConfig::chatrwkv_pipeline() {
  SamplingConfig c;
  c.mode = SamplerMode::kChatRwkv;
  c.temperature = 1.0f;
  c.top_p = 0.85f;
  c.top_k = 0;
  c.presence_penalty = 0.2f;
  c.frequency_penalty = 0.2f;
  c.penalty_decay = 0.996f;
  c.exempt_space_digits = true;
  return c;
}

SamplingConfig SamplingConfig::chatrwkv_chat() {
  SamplingConfig c = chatrwkv_pipeline();
  c.top_p = 0.3f;
  c.presence_penalty = 0.5f;
  c.frequency_penalty = 0.5f;
  c.exempt_space_digits = false;
  c.logit_bias = {{0, -1e10f}};
  return c;
}

void softmax(std::span<const float> z, std::span<float> out) {
  if (z.empty()) throw InputError("softmax: no values");
  if (out.size() != z.size()) {
    throw InputError(
        fmt::format("softmax: output has {} values, expected {}", out.size(), z.size()));
  }
  const float m = max_of(z.data(), z.size());
  if (m == -kInf) throw InputError("softmax: every value is -inf or NaN; nothing to normalise");
  const double inv = 1.0 / exp_shifted(z.data(), z.size(), m, out.data());
  for (float& x : out) x = prob_of(x, inv);
}

std::vector<float> softmax(std::span<const float> z) {
  std::vector<float> out(z.size());
  softmax(z, out);
  return out;
}

bool chatrwkv_exempt_text(std::string_view bytes) {
  constexpr std::string_view kExempt = " \t0123456789";
  return !bytes.empty() && kExempt.find(bytes) != std::string_view::npos;
}

// -----------------------------------------------------------------------------------------------

struct Sampler::Workspace {
  std::vector<float> work;  // adjusted logits, then the values the order sorts by
  std::vector<float> ex;    // exp(z - max)
  std::vector<float> prob;  // chatrwkv: p of every id
  LazyOrder order;
};

Sampler::Sampler(SamplingConfig config, int vocab, TokenBytes token_bytes)
    : config_(std::move(config)),
      vocab_(vocab),
      token_bytes_(std::move(token_bytes)),
      rng_(config_.seed),
      ws_(std::make_unique<Workspace>()) {
  if (vocab <= 0) throw InputError(fmt::format("sampler: vocab must be > 0, got {}", vocab));
  config_.validate(vocab);
  if (config_.mode == SamplerMode::kChatRwkv && config_.exempt_space_digits && !token_bytes_) {
    throw InputError(
        "sampler: the chatrwkv sampler with exempt_space_digits needs the token_bytes callback "
        "(to recognise space and digit tokens); pass one or set exempt_space_digits = false");
  }
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

Sampler::Sampler(const Sampler& other)
    : config_(other.config_),
      vocab_(other.vocab_),
      token_bytes_(other.token_bytes_),
      rng_(other.rng_),
      history_(other.history_),
      exempt_cache_(other.exempt_cache_),
      ws_(std::make_unique<Workspace>()) {}

Sampler& Sampler::operator=(const Sampler& other) {
  if (this != &other) *this = Sampler(other);
  return *this;
}

void Sampler::reset() {
  rng_ = SplitMix64(config_.seed);
  history_.clear();
}

SamplerSnapshot Sampler::snapshot() const {
  SamplerSnapshot s;
  s.mode = config_.mode;
  s.rng_state = rng_.state();
  s.history.assign(history_.begin(), history_.end());
  std::sort(s.history.begin(), s.history.end());
  return s;
}

void Sampler::restore(const SamplerSnapshot& snap) {
  if (snap.mode != config_.mode)
    throw InputError(fmt::format(
        "sampler: the saved sampler state is of the {} sampler but this generation uses the {} "
        "sampler; continue with the same --sampler, or give --seed to start a fresh one",
        sampler_mode_name(snap.mode), sampler_mode_name(config_.mode)));
  int32_t previous = -1;
  for (const auto& [id, weight] : snap.history) {
    if (id < 0 || id >= vocab_ || id <= previous)
      throw InputError(fmt::format(
          "sampler: the saved penalty history has id {} {}; expected ascending distinct ids in "
          "[0, {})",
          id, id <= previous && id >= 0 ? "out of order or repeated" : "outside the vocabulary",
          vocab_));
    if (!std::isfinite(weight) || weight < 0)
      throw InputError(fmt::format(
          "sampler: the saved penalty history gives id {} the weight {}; expected a finite value "
          ">= 0",
          id, weight));
    previous = id;
  }
  rng_ = SplitMix64(snap.rng_state);
  history_.clear();
  for (const auto& [id, weight] : snap.history) history_.emplace(id, weight);
}

void Sampler::adjust_into(std::span<const float> logits, std::vector<float>& out) const {
  if (logits.size() != static_cast<size_t>(vocab_)) {
    throw InputError(
        fmt::format("sampler: expected {} logits (the vocabulary), got {}", vocab_, logits.size()));
  }
  out.resize(logits.size());
  const float* in = logits.data();
  float* w = out.data();
  sanitize_copy(in, w, logits.size());
  for (const auto& [id, bias] : config_.logit_bias) {
    const float x = w[id] + bias;
    w[id] = std::isnan(x) ? -kInf : x;  // -inf + +inf
  }
  for (int32_t id : config_.banned_tokens) w[id] = -kInf;
  if (history_.empty()) return;
  const float presence = config_.presence_penalty, frequency = config_.frequency_penalty;
  if (config_.mode == SamplerMode::kStandard) {
    const float rp = config_.repetition_penalty;
    if (rp == 1 && presence == 0 && frequency == 0) return;  // penalising is not active
    for (const auto& [id, weight] : history_) {
      float x = w[id];
      if (rp != 1) x = x > 0 ? x / rp : x * rp;  // CTRL first (x == 0 stays 0)
      x -= weight * frequency + presence;        // then the additive penalties
      w[id] = x;
    }
  } else {
    if (presence == 0 && frequency == 0) return;
    for (const auto& [id, weight] : history_) w[id] -= presence + weight * frequency;
  }
}

std::vector<float> Sampler::adjusted_logits(std::span<const float> logits) const {
  std::vector<float> out;
  adjust_into(logits, out);
  return out;
}

int32_t Sampler::select(std::span<const float> logits) {
  if (!ws_) ws_ = std::make_unique<Workspace>();  // a moved-from sampler, reassigned
  adjust_into(logits, ws_->work);
  const int32_t id = config_.mode == SamplerMode::kStandard ? select_standard(ws_->work)
                                                            : select_chatrwkv(ws_->work);
  if (id < 0) throw no_candidate(logits);
  return id;
}

// §1.3.
int32_t Sampler::select_standard(std::vector<float>& w) {
  const size_t n = w.size();
  if (!(config_.temperature > 0)) {  // greedy: argmax, first maximum, no RNG draw
    const float m = max_of(w.data(), n);
    if (m == -kInf) return -1;
    return static_cast<int32_t>(std::find(w.begin(), w.end(), m) - w.begin());
  }
  // z = w / T in place (no NaN: w has none, T is finite and > 0).
  const float max = divide_and_max(w.data(), n, config_.temperature);
  if (max == -kInf) return -1;
  Workspace& ws = *ws_;
  ws.ex.resize(n);
  LazyOrder& order = ws.order;
  const double inv_sum = 1.0 / exp_shifted(w.data(), n, max, ws.ex.data(), order.bin_buffer(n));
  // Once the sum is >= 0.5 (half an ulp 2^-25), weights below 2^-26 change nothing.
  const float top_p = config_.top_p;
  const size_t limit = config_.top_k > 0 ? std::min<size_t>(config_.top_k, n) : n;
  order.begin(LazyOrder::Kind::kLogit, n, w.data(), ws.ex.data(), nullptr, inv_sum, limit,
              placed_mass(top_p, limit, n), std::ldexp(1.0, -26));
  const auto weight = [](float p) { return p; };
  const auto bound = [&order](int b) { return order.p_hi(b); };
  const Walk walk = order.walk(limit, top_p, weight, bound, /*tabulate=*/true);
  // The truncation walk keeps `kept` positions (an inert tail is kept but adds nothing).
  const size_t kept = walk.inert ? limit : walk.count;
  const float u = rng_.uniform() * walk.acc;
  const int32_t id = order.draw(u, weight);
  // u == mass (uniform() gave 1, or round-off): the last kept id, skipping zero probabilities
  // so that a banned id can never come out.
  return id >= 0 ? id : order.last_positive(kept, weight);
}

// §1.6.
int32_t Sampler::select_chatrwkv(std::vector<float>& w) {
  const size_t n = w.size();
  float temperature = config_.temperature;
  float top_p = config_.top_p;
  if (temperature == 0) {  // step 2
    temperature = 1;
    top_p = 0;
  }
  const float max = max_of(w.data(), n);
  if (max == -kInf) return -1;
  Workspace& ws = *ws_;
  ws.ex.resize(n);
  ws.prob.resize(n);
  const double inv_sum = 1.0 / exp_shifted(w.data(), n, max, ws.ex.data());
  LazyOrder& order = ws.order;
  probs_and_bins(ws.ex.data(), n, inv_sum, ws.prob.data(), order.bin_buffer(n));  // step 3
  // The first position's p: that of the maximum, whose e is exactly exp_clamped(0) = 1 (or 1
  // for the +inf entries).
  const float p0 = prob_of(1.f, inv_sum);

  const bool cut = top_p < 1;
  const size_t top_k = config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n
                           ? static_cast<size_t>(config_.top_k)
                           : n;
  // Step 6 weights: p^(1/T) as (p / p0)^(1/T) - the same distribution after normalisation,
  // without underflow at small T. At T = 1, p itself.
  const bool powered = temperature != 1;
  const float inv_t = 1.0f / temperature;
  const auto q = [=](float p) { return powered ? std::pow(p / p0, inv_t) : p; };
  const auto q_bound = [&](int b) {
    const double hi = order.p_hi(b);
    return powered ? std::pow(hi / p0, static_cast<double>(inv_t)) * (1 + 1e-4) : hi;
  };
  // Weights q < 2^-26 are inert once the sum is >= 0.5 (q(p0) = 1 when powered).
  const double inert_p = powered ? p0 * std::exp2(-26.0 * temperature) : std::ldexp(1.0, -26);
  order.begin(LazyOrder::Kind::kProb, n, ws.prob.data(), nullptr, ws.prob.data(), 0,
              cut ? n : top_k, powered && !cut ? HUGE_VAL : placed_mass(top_p, top_k, n), inert_p);

  size_t kept = n;
  if (cut) {  // step 4: cutoff = p where the running sum first reaches top_p; ties survive
    const auto p_weight = [](float p) { return p; };
    const auto p_bound = [&order](int b) { return order.p_hi(b); };
    const Walk walk = order.walk(n, top_p, p_weight, p_bound, /*tabulate=*/true);
    // Never reached (round-off with top_p close to 1): upstream's argmax of an all-false mask
    // picks the first position.
    const size_t at = walk.reached ? walk.count - 1 : 0;
    const float cutoff = order.at(at).p;
    const size_t end = order.bin_end(at);  // equal p means equal bin: all ties are in this bin
    kept = at + 1;
    while (kept < end && order.at(kept).p == cutoff) ++kept;
  }
  kept = std::min(kept, top_k);  // step 5
  const Walk total = order.walk(kept, kInf, q, q_bound, /*tabulate=*/!powered);
  const float u = rng_.uniform() * total.acc;  // step 7
  const int32_t id = order.draw(u, q);
  return id >= 0 ? id : order.last_positive(kept, q);
}

float Sampler::exemption_weight(int32_t id) {
  if (exempt_cache_.empty()) exempt_cache_.assign(vocab_, -1);
  int8_t& cached = exempt_cache_[id];
  if (cached < 0) cached = chatrwkv_exempt_text(token_bytes_(id)) ? 1 : 0;
  return cached ? 0.f : 1.f;
}

void Sampler::observe(int32_t id) {
  if (id < 0 || id >= vocab_) {
    throw InputError(
        fmt::format("sampler: observed id {} is outside the vocabulary [0, {})", id, vocab_));
  }
  const float decay = config_.penalty_decay;
  if (config_.mode == SamplerMode::kStandard) {  // §1.2
    if (decay == 0) {
      history_.clear();
    } else if (decay != 1) {
      for (auto& entry : history_) entry.second *= decay;
      std::erase_if(history_, [](const auto& entry) { return entry.second < 1e-6f; });
    }
    history_[id] += 1;
  } else {  // §1.6 H1-H3: decay (never prune), then += w
    if (decay != 1) {
      for (auto& entry : history_) entry.second *= decay;
    }
    history_[id] += config_.exempt_space_digits ? exemption_weight(id) : 1.f;
  }
}

void Sampler::observe_prompt(std::span<const int32_t> ids) {
  if (config_.mode == SamplerMode::kChatRwkv) return;  // ChatRWKV never counts prompt tokens
  for (int32_t id : ids) observe(id);
}

}  // namespace wick
