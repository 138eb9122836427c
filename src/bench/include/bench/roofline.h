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

// FLOPs of the matrix products of one decoded token: prefill_flops_per_token(g, 1), every block's
// products and the head (each decode step computes its token's logits). Like the prefill count it
// leaves out the WKV recurrence, attention scores, norms and element-wise work (and a LoRA
// adapter's factors), so a rate computed from it is a lower bound.
double decode_flops_per_token(const Geometry& g);

// The fastest a batched decode of `rows` rows can run, in tokens per second (all rows together):
// a step reads the weights once for all its rows (bytes_per_step at bytes_per_s, a memory read
// bandwidth: weights that fit in a cache can beat it) and runs rows x flops_per_token FLOPs at
// flops_per_s (the peak of the arithmetic the products run: the fp32 FMA peak, or the BF16 dot
// peak where they use it), so a step takes at least the longer of the two. Judged against it, a
// batch's speed-up over one row has the bound limit / (one row's tokens per second). 0 when
// rows < 1 or any rate or amount is not positive (or NaN).
double batch_decode_limit_tokens_per_s(int rows, double flops_per_token, double flops_per_s,
                                       double bytes_per_step, double bytes_per_s);

}  // namespace wick::bench
