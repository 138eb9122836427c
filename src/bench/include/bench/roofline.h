// Roofline arithmetic (wick's benchmark library): how close a measured figure is to the limit
// measured in the same run. Pure functions: thread-safe. Units are in the names (bytes, seconds,
// FLOPs); rates are per second.
#pragma once

#include <cstdint>

namespace wick {
struct Geometry;
}

namespace wick::bench {

// Seconds that reading `bytes` takes at `bytes_per_s`: the decode roofline of one token when
// `bytes` is what a step reads (ModelInfo::bytes_per_token). 0 when bytes_per_s <= 0.
double roofline_seconds(double bytes, double bytes_per_s);

// Fraction of the limit reached: limit_seconds / measured_seconds (1 = at the limit; above 1
// means the limit was measured low). 0 when measured_seconds <= 0.
double roofline_fraction(double limit_seconds, double measured_seconds);

// Fraction of a peak rate reached: rate / peak (e.g. a prefill's FLOP/s / the FMA peak). 0 when
// peak <= 0.
double peak_fraction(double rate, double peak);

// FLOPs of the matrix products one token of a prefill of n_prompt tokens runs (2 per weight, a
// multiply and an add): in every RWKV-7 block the r/k/v/o projections, the channel mix and the
// w/a/g LoRA pairs (and v's, all blocks but the first); in every RWKV-X attention block q/k/v/o
// and its channel mix; the head [V, C] once per prompt (only the last position's logits are
// computed), i.e. divided by n_prompt. Not counted: the WKV recurrence, attention scores, norms
// and element-wise work (a few percent at the released geometries), so a fraction of the FMA
// peak computed from it is a lower bound. 0 for n_prompt < 1.
double prefill_flops_per_token(const Geometry& g, int n_prompt);

}  // namespace wick::bench
