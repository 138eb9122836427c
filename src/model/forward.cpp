// The x070 block arithmetic (docs/x070-math.md §3-4), written once over T rows. The parallel pass
// runs it with T = prompt length (GEMMs, the WKV recurrence looped inside one kernel); the
// recurrent step runs it with T = 1 (GEMVs). Both read weights only through Linear (apply, or
// model::apply_all for independent products, which runs the dense ones as one pool job).
// LoRA adapters (wick/lora.h) join in project_all() and the norms: each segment (sequence) of a
// pass may carry its own adapter, and every adapter computation is per row, so rows stay
// independent.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/activations.h"
#include "kernels/dot.h"
#include "kernels/exp_math.h"
#include "kernels/gate_loops.h"
#include "kernels/int8_inputs.h"
#include "kernels/norm.h"
#include "kernels/thread_pool.h"
#include "kernels/wkv7.h"
#include "model/attention.h"
#include "model/lora.h"
#include "model/model_impl.h"
#include "model/state_geometry.h"
#include "model/tensor_table.h"
#include "runtime/runtime_impl.h"
#include "wick/errors.h"
#include "wick/lora.h"

namespace wick {
namespace {

using model::AttentionBlockWeights;
using model::LayerWeights;
using model::ModelWeights;

// The trace names of the projections' inputs: the tensor table's trace column, which the
// activation statistics read their keys from.
const std::string_view kInReceptance = model::input_trace(&LayerWeights::receptance);
const std::string_view kInKey = model::input_trace(&LayerWeights::key);
const std::string_view kInValue = model::input_trace(&LayerWeights::value);
const std::string_view kInOutput = model::input_trace(&LayerWeights::output);
const std::string_view kInFfnKey = model::input_trace(&LayerWeights::ffn_key);
const std::string_view kInFfnValue = model::input_trace(&LayerWeights::ffn_value);
const std::string_view kInHead = model::input_trace(&ModelWeights::head);

constexpr double kLayerNormEps = 1e-5;
constexpr double kGroupNormEps = 64e-5;  // deliberate constant (docs/x070-math.md §1.3)
constexpr float kL2NormEps = 1e-12f;
using kernels::kDecayScale;

using kernels::sigmoid;

// One sequence of a (possibly batched) pass: its rows [row0, row0 + T) of the workspace and the
// state it continues. Rows of all segments go through every matrix product together (one GEMM);
// token shift and the WKV recurrence run per segment, each from its own state.
struct Segment {
  int64_t row0 = 0;
  int64_t T = 0;
  State* state = nullptr;
  int64_t pos0 = 0;  // RWKV-X: KV-cache rows before this call (position of the first row)
  const model::LoraWeights* lora = nullptr;  // this sequence's LoRA adapter, or null
  float lora_scale = 0.f;                    // its multiplier of B·A
};

// Activation buffers of a pass, kept in the Runtime between passes (RuntimeLease::workspace) and
// grown to the largest pass seen, never shrunk: a steady-state decode step allocates nothing.
// Every buffer is written before it is read within a pass, so what a previous pass left in it
// never matters.
struct Workspace final : PassWorkspace {
  // Sizes every buffer for T rows of geometry g (growing only).
  void prepare(const Geometry& g, int64_t T, Precision p, kernels::ThreadPool& thread_pool) {
    precision = p;
    pool = &thread_pool;
    const int64_t C = g.n_embd;
    auto mk = [&](std::vector<float>& v, int64_t cols) {
      const size_t n = static_cast<size_t>(T * cols);
      if (v.size() < n) v.resize(n);
    };
    for (auto* v : {&x, &xa, &xr, &xw, &xk, &xv, &xaa,  &xg,      &r,  &k,
                    &v, &w,  &a,  &g_, &kk, &y,  &tmpc, &v_first, &xb, &normed})
      mk(*v, C);
    mk(lora_w, std::max(g.lora_w, 1));
    mk(lora_a, std::max(g.lora_a, 1));
    mk(lora_g, std::max(g.lora_g, 1));
    mk(lora_v, std::max(g.lora_v, 1));
    mk(ffn_h, std::max(g.ffn_dim, g.attn_ffn_dim));
  }
  // Scratch of the LoRA adapters' low-rank terms for T rows of rank up to `rank`.
  void prepare_adapters(const Geometry& g, int64_t T, int64_t rank) {
    const size_t u = static_cast<size_t>(T * rank),
                 d = static_cast<size_t>(T * std::max<int64_t>(g.n_embd, g.ffn_dim));
    if (ad_u.size() < u) ad_u.resize(u);
    if (ad_d.size() < d) ad_d.resize(d);
  }
  std::vector<float> x, xa, xr, xw, xk, xv, xaa, xg, r, k, v, w, a, g_, kk, y, tmpc, v_first, xb;
  std::vector<float> lora_w, lora_a, lora_g, lora_v;  // the LoRA factors' hidden rows [T, rank]
  std::vector<float> ffn_h, normed;
  std::vector<Segment> segs;
  std::vector<kernels::Wkv7Segment> wkv_segs;  // a layer's segments for wkv7_segments
  std::vector<int64_t> rows;
  Precision precision = Precision::kFp32;
  kernels::ThreadPool* pool = nullptr;  // the lease's pool, for this pass
  std::vector<float> rounded;  // kBf16: a large product's input rows, rounded; kInt8: scratch
  std::vector<int8_t> codes;   // kInt8: their 8-bit codes [T, in] and superblock scales
  std::vector<float> code_scales;
  // LoRA adapters of this pass: whether any segment has one, each row's adapter (filled only
  // then), and the low-rank terms' scratch: x·Aᵀ [rows, r] and (x·Aᵀ)·Bᵀ [rows, out].
  bool any_adapter = false;
  std::vector<const model::LoraWeights*> row_adapter;
  std::vector<float> ad_u, ad_d;
};

// fn(t) for every row t < T: rows are independent, so blocks of rows run on the kernel threads
// (the results do not depend on which thread computes a row). Short passes stay on the caller.
template <typename Fn>
void for_each_row(kernels::ThreadPool& pool, int64_t T, Fn&& fn) {
  constexpr int64_t kRowsPerBlock = 16;
  if (T < 2 * kRowsPerBlock) {
    for (int64_t t = 0; t < T; ++t) fn(t);
    return;
  }
  kernels::parallel_for(pool, (T + kRowsPerBlock - 1) / kRowsPerBlock, [&](int64_t b) {
    for (int64_t t = b * kRowsPerBlock; t < std::min(T, (b + 1) * kRowsPerBlock); ++t) fn(t);
  });
}

// fn(i0, i1) over the index range [0, n) in blocks on the kernel threads: the flat element-wise
// loops of a pass (every element's arithmetic is its own, so the blocking changes no result).
template <typename Fn>
void for_each_span(kernels::ThreadPool& pool, int64_t n, Fn&& fn) {
  constexpr int64_t kBlock = 8192;
  if (n < 2 * kBlock) {
    fn(int64_t{0}, n);
    return;
  }
  kernels::parallel_for(pool, (n + kBlock - 1) / kBlock,
                        [&](int64_t b) { fn(b * kBlock, std::min(n, (b + 1) * kBlock)); });
}

// x[i] += d[i], i < n (a residual connection).
void add_rows(float* x, const float* d, int64_t n, kernels::ThreadPool& pool) {
  for_each_span(pool, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] += d[i];
  });
}

// y += scale·(x·Aᵀ)·Bᵀ for the rows of every segment whose adapter adapts projection `target` of
// RWKV layer `layer`. Consecutive segments with the same adapter form one product (the matrix
// kernels are row-invariant, so a row's result does not depend on its neighbours).
void add_adapter_terms(int64_t in, int64_t out, const float* x, float* y, Workspace& ws,
                       std::span<const Segment> segs, int layer, int target) {
  size_t b = 0;
  while (b < segs.size()) {
    const model::LoraWeights* ad = segs[b].lora;
    size_t e = b + 1;
    while (e < segs.size() && segs[e].lora == ad && segs[e].lora_scale == segs[b].lora_scale) ++e;
    const model::LoraPair* p = ad ? &ad->layers[static_cast<size_t>(layer)].pairs[target] : nullptr;
    if (p && p->down) {
      const int64_t row0 = segs[b].row0, n = segs[e - 1].row0 + segs[e - 1].T - row0;
      float* u = ws.ad_u.data();
      float* d = ws.ad_d.data();
      p->down->apply(x + row0 * in, n, u, *ws.pool);
      p->up->apply(u, n, d, *ws.pool);
      float* yo = y + row0 * out;
      const float scale = segs[b].lora_scale;
      for_each_span(*ws.pool, n * out, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) yo[i] += scale * d[i];
      });
    }
    b = e;
  }
}

// W x over T rows at Precision::kBf16 / kInt8 (not kFp32): the input rows are first rounded
// (wick/model.h).
void product_of_rounded(const model::Linear& L, const float* x, int64_t T, float* y,
                        Workspace& ws) {
  WICK_CHECK(ws.precision != Precision::kFp32, "fp32 inputs are not rounded");
  const int64_t in = L.in_features();
  const size_t n = static_cast<size_t>(T * in);
  if (ws.rounded.size() < n) ws.rounded.resize(n);
  float* rounded = ws.rounded.data();
  if (ws.precision == Precision::kBf16) {
    for_each_span(*ws.pool, static_cast<int64_t>(n), [&](int64_t i0, int64_t i1) {
      base::round_to_bf16(x + i0, rounded + i0, static_cast<size_t>(i1 - i0));
    });
    L.apply_bf16_inputs(rounded, T, y, *ws.pool);
    return;
  }
  const size_t ns = static_cast<size_t>(T * kernels::int8_input_blocks(in));
  if (ws.codes.size() < n) ws.codes.resize(n);
  if (ws.code_scales.size() < ns) ws.code_scales.resize(ns);
  kernels::round_inputs_int8(x, T, in, ws.codes.data(), ws.code_scales.data(), *ws.pool);
  L.apply_int8_inputs(kernels::Int8Inputs{ws.codes.data(), ws.code_scales.data(), T, in}, rounded,
                      y, *ws.pool);
}

// A large matrix product (r/k/v/o, FFN key/value, attention q/k/v/o, head): y = W x over T rows,
// plus the segments' LoRA terms when `target` names an adapted projection of RWKV layer `layer`.
// With Precision::kBf16 / kInt8 the input rows are first rounded (wick/model.h) for W x; the LoRA
// branches of the model (Linear::apply directly) and the adapters' terms stay fp32.
struct Projection {
  const model::Linear& L;
  const float* x;
  float* y;
  int target = model::kLoraNone;
};

// Each of the `large` products (Projection above) and Linear::apply of each of `factors` (the
// model's own LoRA factors, whose inputs stay fp32), every result what those calls give one by
// one. At fp32 precision they all share one pool job where their matrices are dense
// (model::apply_all); at the other precisions the large products (their inputs rounded first) run
// one by one, then the factors as one job.
void project_all(std::span<const Projection> large, std::span<const model::LinearCall> factors,
                 int64_t T, Workspace& ws, std::span<const Segment> segs = {}, int layer = -1) {
  WICK_CHECK(large.size() + factors.size() <= kernels::kMaxMatmulCalls,
             "project_all takes at most kernels::kMaxMatmulCalls products");
  std::array<model::LinearCall, kernels::kMaxMatmulCalls> calls;
  size_t n = 0;
  for (const Projection& p : large) {
    if (ws.precision == Precision::kFp32)
      calls[n++] = {&p.L, p.x, p.y};
    else
      product_of_rounded(p.L, p.x, T, p.y, ws);
  }
  for (const model::LinearCall& f : factors) calls[n++] = f;
  model::apply_all(std::span(calls.data(), n), T, *ws.pool);
  if (ws.any_adapter)
    for (const Projection& p : large)
      if (p.target != model::kLoraNone)
        add_adapter_terms(p.L.in_features(), p.L.out_features(), p.x, p.y, ws, segs, layer,
                          p.target);
}

// One large product (Projection above).
void project(const model::Linear& L, const float* x, int64_t T, float* y, Workspace& ws,
             std::span<const Segment> segs = {}, int layer = -1, int target = model::kLoraNone) {
  const Projection p{L, x, y, target};
  project_all(std::span(&p, 1), {}, T, ws, segs, layer);
}

// The norm vector a segment uses: its adapter's replacement of RWKV layer `layer`'s member, else
// the base's.
const std::vector<float>& layer_norm_of(const Segment& s, int layer,
                                        std::vector<float> LayerWeights::*member,
                                        const LayerWeights& base) {
  if (!s.lora) return base.*member;
  return model::pick_norm(s.lora->layers[static_cast<size_t>(layer)].norms.*member, base.*member);
}

void trace_out(const ActivationTrace* trace, std::string_view name, int layer, const float* data,
               int64_t rows, int64_t cols) {
  if (trace && *trace) (*trace)(name, layer, data, rows, cols);
}

// LayerNorm (eps 1e-5) of each of T rows of C channels; an empty bias means zero.
void layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b,
                     float* y, int64_t T, int64_t C, kernels::ThreadPool& pool) {
  for_each_row(pool, T, [&](int64_t t) {
    kernels::layer_norm(x + t * C, w.data(), b.empty() ? nullptr : b.data(), y + t * C, C,
                        kLayerNormEps);
  });
}

// Token shift of T rows: for each (mix, out) pair, out[t] = x[t] + (prev[t] - x[t]) * mix, where
// prev[0] = shift and prev[t] = x[t-1]; then shift = x[T-1] (the state's next shift).
struct ShiftMix {
  const float* mix;
  float* out;
};
void token_shift_mix(const float* x, float* shift, std::initializer_list<ShiftMix> mixes, int64_t T,
                     int64_t C, kernels::ThreadPool& pool) {
  for_each_row(pool, T, [&](int64_t t) {
    const float* cur = x + t * C;
    const float* prev = t == 0 ? shift : x + (t - 1) * C;
    for (const ShiftMix& m : mixes) {
      float* o = m.out + t * C;
      for (int64_t c = 0; c < C; ++c) o[c] = cur[c] + (prev[c] - cur[c]) * m.mix[c];
    }
  });
  std::memcpy(shift, x + (T - 1) * C, C * sizeof(float));
}

void time_mix(const LayerWeights& L, const Geometry& g, int layer, int64_t T,
              std::span<const Segment> segs, Workspace& ws, const ActivationTrace* trace) {
  const int64_t C = g.n_embd;
  const int H = g.n_head, N = g.head_size;
  float* x = ws.x.data();
  float* xa = ws.xa.data();
  kernels::ThreadPool& pool = *ws.pool;
  for (const Segment& s : segs)
    layer_norm_rows(x + s.row0 * C, layer_norm_of(s, layer, &LayerWeights::ln1_w, L),
                    layer_norm_of(s, layer, &LayerWeights::ln1_b, L), xa + s.row0 * C, s.T, C,
                    pool);
  for (const Segment& s : segs) {
    const int64_t o = s.row0 * C;
    token_shift_mix(xa + o, s.state->att_shift(layer),
                    {{L.x_r.data(), ws.xr.data() + o},
                     {L.x_w.data(), ws.xw.data() + o},
                     {L.x_k.data(), ws.xk.data() + o},
                     {L.x_v.data(), ws.xv.data() + o},
                     {L.x_a.data(), ws.xaa.data() + o},
                     {L.x_g.data(), ws.xg.data() + o}},
                    s.T, C, pool);
  }

  float *r = ws.r.data(), *k = ws.k.data(), *v = ws.v.data(), *w = ws.w.data(), *a = ws.a.data();
  float *gate = ws.g_.data(), *kk = ws.kk.data(), *tmp = ws.tmpc.data();
  trace_out(trace, kInReceptance, layer, ws.xr.data(), T, C);
  trace_out(trace, kInKey, layer, ws.xk.data(), T, C);
  trace_out(trace, kInValue, layer, ws.xv.data(), T, C);
  // Every product that reads only the token-shifted inputs, then the LoRA up-projections: each
  // group one pool job (project_all).
  float *lw = ws.lora_w.data(), *la = ws.lora_a.data(), *lg = ws.lora_g.data();
  float* lv = ws.lora_v.data();
  const Projection large[] = {{*L.receptance, ws.xr.data(), r, model::kLoraReceptance},
                              {*L.key, ws.xk.data(), k, model::kLoraKey},
                              {*L.value, ws.xv.data(), v, model::kLoraValue}};
  const model::LinearCall downs[] = {{L.w1.get(), ws.xw.data(), lw},
                                     {L.a1.get(), ws.xaa.data(), la},
                                     {L.g1.get(), ws.xg.data(), lg},
                                     {L.v1.get(), ws.xv.data(), lv}};
  // Layer 0 has no value residual (its value is v_first): no v1 / v2.
  const bool value_residual = layer != 0;
  const size_t n_factors = value_residual ? 4 : 3;
  project_all(large, std::span(downs, n_factors), T, ws, segs, layer);
  // Decay: w = exp(-e^(-1/2) * sigmoid(w0 + tanh(xw @ w1) @ w2)). In-context learning rate:
  // a = sigmoid(a0 + (xa @ a1) @ a2). Output gate: g = sigmoid(xg @ g1) @ g2. Value residual
  // gate: sigmoid(v0 + (xv @ v1) @ v2).
  for_each_span(pool, T * L.w1->out_features(), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) lw[i] = std::tanh(lw[i]);
  });
  const kernels::GateLoops& gates = kernels::gate_loops();
  for_each_span(pool, T * L.g1->out_features(), [&](int64_t i0, int64_t i1) {
    gates.sigmoid_in_place(lg + i0, static_cast<size_t>(i1 - i0));
  });
  const model::LinearCall ups[] = {
      {L.w2.get(), lw, w}, {L.a2.get(), la, a}, {L.g2.get(), lg, gate}, {L.v2.get(), lv, tmp}};
  model::apply_all(std::span(ups, n_factors), T, pool);

  const bool tracing = trace && *trace;
  std::vector<float> logdecay;
  if (tracing) logdecay.resize(static_cast<size_t>(T * C));
  for_each_row(pool, T, [&](int64_t t) {
    float* wt = w + t * C;
    float* at = a + t * C;
    float* kt = k + t * C;
    float* kkt = kk + t * C;
    if (tracing)
      for (int64_t c = 0; c < C; ++c)
        logdecay[t * C + c] = std::log(kDecayScale * sigmoid(L.w0[c] + wt[c]));
    gates.decay_rate_key(L.w0.data(), L.a0.data(), L.k_k.data(), kt, wt, at, kkt,
                         static_cast<size_t>(C));
    // Removal key: per-head L2 normalisation (floor 1e-12 on the norm, as F.normalize).
    for (int h = 0; h < H; ++h) {
      float* u = kkt + h * N;
      double ss = 0;
      for (int n = 0; n < N; ++n) ss += static_cast<double>(u[n]) * u[n];
      const float norm = std::max(static_cast<float>(std::sqrt(ss)), kL2NormEps);
      for (int n = 0; n < N; ++n) u[n] /= norm;
    }
    // Key written into the state: k * (1 + (a - 1) * k_a).
    for (int64_t c = 0; c < C; ++c) kt[c] = kt[c] * (1.f + (at[c] - 1.f) * L.k_a[c]);
  });

  // Value residual: layer 0 remembers its value; later layers mix towards it.
  if (!value_residual) {
    std::memcpy(ws.v_first.data(), v, T * C * sizeof(float));
    trace_out(trace, "v_first", layer, v, T, C);
  } else {
    for_each_row(pool, T, [&](int64_t t) {
      gates.value_residual(L.v0.data(), tmp + t * C, ws.v_first.data() + t * C, v + t * C,
                           static_cast<size_t>(C));
    });
  }

  float* y = ws.y.data();
  std::vector<kernels::Wkv7Segment>& wkv_segs = ws.wkv_segs;  // cleared, its capacity kept
  wkv_segs.clear();
  for (const Segment& s : segs) {
    const int64_t o = s.row0 * C;
    wkv_segs.push_back(
        {s.T, s.state->wkv(layer), r + o, w + o, k + o, v + o, kk + o, a + o, y + o});
  }
  kernels::wkv7_segments(wkv_segs.data(), static_cast<int64_t>(wkv_segs.size()), H, N, pool);

  if (tracing) {
    std::vector<float> neg_kk(kk, kk + T * C), bvec(static_cast<size_t>(T * C));
    for (int64_t i = 0; i < T * C; ++i) {
      neg_kk[i] = -kk[i];
      bvec[i] = kk[i] * a[i];
    }
    (*trace)("r", layer, r, T, C);
    (*trace)("k", layer, k, T, C);
    (*trace)("v", layer, v, T, C);
    (*trace)("w_logdecay", layer, logdecay.data(), T, C);
    (*trace)("a", layer, neg_kk.data(), T, C);
    (*trace)("b", layer, bvec.data(), T, C);
    (*trace)("wkv_out", layer, y, T, C);
  }

  // GroupNorm per head, bonus term sum(r * k * r_k) * v per head, output gate, W_o.
  for_each_row(pool, T, [&](int64_t t) {
    float* yt = y + t * C;
    const model::LoraWeights* ad = ws.any_adapter ? ws.row_adapter[t] : nullptr;
    const model::LayerWeights* rep = ad ? &ad->layers[static_cast<size_t>(layer)].norms : nullptr;
    const std::vector<float>& gw = rep ? model::pick_norm(rep->ln_x_w, L.ln_x_w) : L.ln_x_w;
    const std::vector<float>& gb = rep ? model::pick_norm(rep->ln_x_b, L.ln_x_b) : L.ln_x_b;
    kernels::group_norm(yt, gw.data(), gb.data(), yt, H, N, kGroupNormEps);
    const float* rt = r + t * C;
    const float* kt = k + t * C;
    const float* vt = v + t * C;
    for (int h = 0; h < H; ++h) {
      float s = 0.f;
      for (int n = 0; n < N; ++n) s += rt[h * N + n] * kt[h * N + n] * L.r_k[h * N + n];
      for (int n = 0; n < N; ++n) yt[h * N + n] += s * vt[h * N + n];
    }
    const float* gt = gate + t * C;
    for (int64_t c = 0; c < C; ++c) yt[c] *= gt[c];
  });
  trace_out(trace, kInOutput, layer, y, T, C);
  project(*L.output, y, T, tmp, ws, segs, layer, model::kLoraOutput);
  trace_out(trace, "att_out", layer, tmp, T, C);
  add_rows(x, tmp, T * C, pool);
}

// The x070 channel mix (token shift + squared-ReLU FFN) of an RWKV layer or of an RWKV-X
// attention block, over the rows of every segment; `shift_of` gives a segment state's shift [C].
// `rwkv` is the RWKV layer's weights (its adapters apply), or null for an attention block.
struct ChannelMixRef {
  const std::vector<float>& ln_w;
  const std::vector<float>& ln_b;
  const std::vector<float>& x_k;
  const model::Linear& key;
  const model::Linear& value;
  const LayerWeights* rwkv = nullptr;
};

template <typename ShiftOf>
void channel_mix(const ChannelMixRef& L, const Geometry& g, int layer, int64_t T,
                 std::span<const Segment> segs, Workspace& ws, const ActivationTrace* trace,
                 ShiftOf shift_of) {
  const int64_t C = g.n_embd, F = L.key.out_features();
  float* x = ws.x.data();
  float* xb = ws.xb.data();
  kernels::ThreadPool& pool = *ws.pool;
  if (L.rwkv) {
    for (const Segment& s : segs)
      layer_norm_rows(x + s.row0 * C, layer_norm_of(s, layer, &LayerWeights::ln2_w, *L.rwkv),
                      layer_norm_of(s, layer, &LayerWeights::ln2_b, *L.rwkv), xb + s.row0 * C, s.T,
                      C, pool);
  } else {
    layer_norm_rows(x, L.ln_w, L.ln_b, xb, T, C, pool);
  }
  for (const Segment& s : segs) {
    const int64_t o = s.row0 * C;
    token_shift_mix(xb + o, shift_of(*s.state), {{L.x_k.data(), ws.xk.data() + o}}, s.T, C, pool);
  }
  float* h = ws.ffn_h.data();
  trace_out(trace, kInFfnKey, layer, ws.xk.data(), T, C);
  const int target_layer = L.rwkv ? layer : -1;
  project(L.key, ws.xk.data(), T, h, ws, segs, target_layer,
          L.rwkv ? model::kLoraFfnKey : model::kLoraNone);
  for_each_span(pool, T * F,
                [&](int64_t i0, int64_t i1) { kernels::relu_squared(h + i0, i1 - i0); });
  trace_out(trace, kInFfnValue, layer, h, T, F);
  float* out = ws.tmpc.data();
  project(L.value, h, T, out, ws, segs, target_layer,
          L.rwkv ? model::kLoraFfnValue : model::kLoraNone);
  trace_out(trace, "ffn_out", layer, out, T, C);
  add_rows(x, out, T * C, pool);
}

void channel_mix(const LayerWeights& L, const Geometry& g, int layer, int64_t T,
                 std::span<const Segment> segs, Workspace& ws, const ActivationTrace* trace) {
  channel_mix(ChannelMixRef{L.ln2_w, L.ln2_b, L.ffn_x_k, *L.ffn_key, *L.ffn_value, &L}, g, layer, T,
              segs, ws, trace, [layer](State& s) { return s.ffn_shift(layer); });
}

// RWKV-X attention block j (docs/rwkvx.md §4.2): x += W_o · attention(LN1(x)) over the block's KV
// cache, then its own channel mix. The segments' caches were already extended to pos0 + T rows;
// this block fills its rows [pos0, pos0 + T) before attending (a token sees its own key).
void attention_block(const AttentionBlockWeights& A, const Geometry& g, int j, int64_t T,
                     std::span<const Segment> segs, Workspace& ws, const AttentionOptions& options,
                     const ActivationTrace* trace) {
  const int64_t C = g.n_embd;
  float* x = ws.x.data();
  float* xa = ws.xa.data();
  layer_norm_rows(x, A.ln1_w, A.ln1_b, xa, T, C, *ws.pool);
  float *q = ws.r.data(), *k = ws.k.data(), *v = ws.v.data(), *y = ws.y.data();
  const Projection qkv[] = {{*A.query, xa, q}, {*A.key, xa, k}, {*A.value, xa, v}};
  project_all(qkv, {}, T, ws);
  for (const Segment& s : segs) {
    const size_t o = static_cast<size_t>(s.row0 * C), n = static_cast<size_t>(s.T * C);
    std::memcpy(s.state->k_cache(j) + s.pos0 * C, k + o, n * sizeof(float));
    std::memcpy(s.state->v_cache(j) + s.pos0 * C, v + o, n * sizeof(float));
    model::attend_rows(*s.state, j, options, q + o, s.T, s.pos0, C, y + o, *ws.pool);
  }
  trace_out(trace, "attn.q", j, q, T, C);
  trace_out(trace, "attn.y", j, y, T, C);
  float* out = ws.tmpc.data();
  project(*A.output, y, T, out, ws);
  add_rows(x, out, T * C, *ws.pool);
  trace_out(trace, "attn_out", j, out, T, C);
  // The attention block's channel mix is not reported under the RWKV layers' matrix-input names.
  channel_mix(ChannelMixRef{A.ln2_w, A.ln2_b, A.ffn_x_k, *A.ffn_key, *A.ffn_value}, g, j, T, segs,
              ws, nullptr, [j](State& s) { return s.attn_ffn_shift(j); });
}

// The embedding rows of one segment and ln0 (the segment's adapter's ln0 when it replaces it).
void embed(const ModelWeights& w, const Geometry& g, const int32_t* tokens, int64_t T, float* x,
           const model::LoraWeights* ad) {
  const int64_t C = g.n_embd;
  const std::vector<float>& ln_w = ad ? model::pick_norm(ad->norms.ln0_w, w.ln0_w) : w.ln0_w;
  const std::vector<float>& ln_b = ad ? model::pick_norm(ad->norms.ln0_b, w.ln0_b) : w.ln0_b;
  for (int64_t t = 0; t < T; ++t) {
    float* row = x + t * C;
    w.emb->row(tokens[t], row);
    if (!ln_w.empty())
      kernels::layer_norm(row, ln_w.data(), ln_b.empty() ? nullptr : ln_b.data(), row, C,
                          kLayerNormEps);
  }
}

void check_tokens(const Geometry& g, std::span<const int32_t> tokens, const std::string& where) {
  if (tokens.empty())
    throw InputError("no tokens given" + where + ": expected at least one token id");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= g.vocab) {
      throw InputError("token id " + std::to_string(tokens[i]) + " at position " +
                       std::to_string(i) + where + " is outside this model's vocabulary [0, " +
                       std::to_string(g.vocab) + "); was the text encoded with another tokenizer?");
    }
  }
}

void check_state(const Geometry& g, const State* st, const std::string& where) {
  if (st == nullptr)
    throw InputError("null state" + where + ": pass a State from Model::new_state()");
  if (!state_fits(*st, g)) throw_state_mismatch(StateGeometry::of(*st), g, "the state" + where);
}

// A KV cache may not grow past options.kv_max rows (RWKV-X).
void check_kv_room(const Geometry& g, const AttentionOptions& options, const State& st, int64_t T,
                   const std::string& where) {
  if (g.n_attn == 0 || options.kv_max <= 0) return;
  if (st.kv_length() + T > options.kv_max) {
    throw ContextFullError("the KV cache" + where + " holds " + std::to_string(st.kv_length()) +
                           " tokens and this call adds " + std::to_string(T) +
                           ", which passes its limit of " + std::to_string(options.kv_max) +
                           " (kv_max); nothing was changed. Start a new context (a fresh state) "
                           "or raise the limit (--kv-max)");
  }
}

// What a pass returns: logits or ln_out hidden states, of the last position of each sequence or of
// every position; or nothing (the states advance only).
enum class Rows { kLastOfEach, kAll, kNone };
enum class Output { kLogits, kHidden };

// Where the output goes: a vector the pass sizes, or a caller's buffer of the exact size.
struct Dest {
  std::vector<float>* vec = nullptr;
  std::span<float> span;
  float* get(size_t n) const {
    if (vec) {
      vec->resize(n);
      return vec->data();
    }
    if (span.size() != n)
      throw InputError("the output buffer holds " + std::to_string(span.size()) +
                       " floats but this pass writes " + std::to_string(n) +
                       " (rows x vocabulary or width); pass a buffer of exactly that size");
    return span.data();
  }
};

// The pass over all sequences at once. Every input is validated before any state changes, so a
// throw leaves every state as it was.
// `adapters`: one per sequence (null = none), or empty: every sequence uses `own` (may be null).
void run(const Model::Impl& m, const Runtime& runtime, const AttentionOptions& attention,
         Precision precision, std::span<const std::span<const int32_t>> seqs,
         std::span<State* const> states, Rows out_rows, Output output, const ActivationTrace* trace,
         const Dest& dest, const LoraAdapter* own = nullptr,
         std::span<const LoraAdapter* const> adapters = {}) {
  const Geometry& g = m.geometry;
  if (output == Output::kLogits && out_rows != Rows::kNone && !m.weights.head) {
    throw InputError("this checkpoint (" + m.info.source +
                     ") has no LM head (an embedding backbone): it gives hidden states, not "
                     "logits; use it through the embedder / reranker (Model::hidden)");
  }
  if (seqs.size() != states.size())
    throw InputError(std::to_string(seqs.size()) + " sequences but " +
                     std::to_string(states.size()) + " states: expected one state per sequence");
  if (seqs.empty()) throw InputError("no sequences given: expected at least one");
  if (!adapters.empty() && adapters.size() != seqs.size())
    throw InputError(std::to_string(seqs.size()) + " sequences but " +
                     std::to_string(adapters.size()) +
                     " LoRA adapters: expected one adapter pointer (or null) per sequence");
  RuntimeLease lease(runtime);
  Workspace& ws = lease.workspace<Workspace>();
  std::vector<Segment>& segs = ws.segs;
  segs.resize(seqs.size());
  int64_t total = 0;
  for (size_t b = 0; b < seqs.size(); ++b) {
    // Messages are built only on the error path (no allocation in a steady-state pass).
    auto where = [&] {
      return seqs.size() > 1 ? " (sequence " + std::to_string(b) + ")" : std::string();
    };
    if (seqs[b].empty() || states[b] == nullptr) {
      check_tokens(g, seqs[b], where());
      check_state(g, states[b], where());
    }
    for (int32_t t : seqs[b])
      if (t < 0 || t >= g.vocab) check_tokens(g, seqs[b], where());
    const State* st = states[b];
    if (!state_fits(*st, g)) check_state(g, st, where());
    for (size_t e = 0; e < b; ++e)
      if (states[e] == states[b])
        throw InputError("sequences " + std::to_string(e) + " and " + std::to_string(b) +
                         " share one State object: each sequence needs its own state");
    if (g.n_attn > 0)
      check_kv_room(g, attention, *states[b], static_cast<int64_t>(seqs[b].size()), where());
    const LoraAdapter* ad = adapters.empty() ? own : adapters[b];
    if (ad) model::check_adapter_geometry(*ad, g);
    segs[b] = Segment{total,
                      static_cast<int64_t>(seqs[b].size()),
                      states[b],
                      states[b]->kv_length(),
                      ad ? ad->impl().weights.get() : nullptr,
                      ad ? model::applied_scale(*ad) : 0.f};
    total += segs[b].T;
  }
  const int64_t C = g.n_embd;
  // Rows whose output is returned, and the output buffer (its size is checked before any state
  // changes).
  std::vector<int64_t>& rows = ws.rows;
  rows.clear();
  if (out_rows == Rows::kAll) {
    for (int64_t t = 0; t < total; ++t) rows.push_back(t);
  } else if (out_rows == Rows::kLastOfEach) {
    for (const Segment& s : segs) rows.push_back(s.row0 + s.T - 1);
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  float* out = out_rows == Rows::kNone
                   ? nullptr
                   : dest.get(static_cast<size_t>(n * (output == Output::kHidden ? C : g.vocab)));
  ws.prepare(g, total, precision, lease.pool());
  ws.any_adapter = false;
  int64_t max_rank = 0;
  for (const Segment& s : segs)
    if (s.lora) {
      ws.any_adapter = true;
      max_rank = std::max<int64_t>(max_rank, s.lora->rank);
    }
  if (ws.any_adapter) {
    ws.prepare_adapters(g, total, max_rank);
    ws.row_adapter.resize(static_cast<size_t>(total));
    for (const Segment& s : segs) std::fill_n(ws.row_adapter.begin() + s.row0, s.T, s.lora);
  }
  // RWKV-X: every attention block appends one K and V row per token (filled block by block). Room
  // is reserved for every state first, so the resize cannot fail half-way.
  if (g.n_attn > 0) {
    for (const Segment& s : segs) s.state->reserve_kv(s.pos0 + s.T);
    for (const Segment& s : segs) s.state->resize_kv(s.pos0 + s.T);
  }
  for (size_t b = 0; b < segs.size(); ++b)
    embed(m.weights, g, seqs[b].data(), segs[b].T, ws.x.data() + segs[b].row0 * C, segs[b].lora);
  trace_out(trace, "emb_ln0", -1, ws.x.data(), total, C);
  const std::span<const Segment> seg_span(segs.data(), segs.size());
  for (const model::BlockRef& blk : m.weights.order) {
    const int i = blk.index;
    if (blk.attention) {
      attention_block(m.weights.attention[i], g, i, total, seg_span, ws, attention, trace);
      trace_out(trace, "attn_block_out", i, ws.x.data(), total, C);
      continue;
    }
    time_mix(m.weights.layers[i], g, i, total, seg_span, ws, trace);
    channel_mix(m.weights.layers[i], g, i, total, seg_span, ws, trace);
    trace_out(trace, "block_out", i, ws.x.data(), total, C);
  }
  // Final LayerNorm and head only for the rows that are returned.
  if (out_rows == Rows::kNone) return;
  float* normed = output == Output::kHidden ? out : ws.normed.data();
  for (int64_t i = 0; i < n; ++i) {
    const model::LoraWeights* ad = ws.any_adapter ? ws.row_adapter[rows[i]] : nullptr;
    const std::vector<float>& ln_w =
        ad ? model::pick_norm(ad->norms.ln_out_w, m.weights.ln_out_w) : m.weights.ln_out_w;
    const std::vector<float>& ln_b =
        ad ? model::pick_norm(ad->norms.ln_out_b, m.weights.ln_out_b) : m.weights.ln_out_b;
    layer_norm_rows(ws.x.data() + rows[i] * C, ln_w, ln_b, normed + i * C, 1, C, *ws.pool);
  }
  if (output == Output::kHidden) return;
  trace_out(trace, kInHead, -1, normed, n, C);
  project(*m.weights.head, normed, n, out, ws);
}

std::span<const std::span<const int32_t>> one(const std::span<const int32_t>& tokens) {
  return std::span<const std::span<const int32_t>>(&tokens, 1);
}

}  // namespace

std::vector<float> Model::forward(std::span<const int32_t> tokens, State& state, bool all_positions,
                                  const ActivationTrace* trace) const {
  State* st = &state;
  std::vector<float> out;
  run(*impl_, *runtime_, attention_, precision_, one(tokens), std::span<State* const>(&st, 1),
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kLogits, trace, Dest{&out, {}},
      adapter_.get());
  return out;
}

void Model::forward(std::span<const int32_t> tokens, State& state, std::span<float> logits,
                    bool all_positions) const {
  State* st = &state;
  run(*impl_, *runtime_, attention_, precision_, one(tokens), std::span<State* const>(&st, 1),
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kLogits, nullptr,
      Dest{nullptr, logits}, adapter_.get());
}

std::vector<float> Model::step(int32_t token, State& state) const {
  return forward(std::span<const int32_t>(&token, 1), state);
}

void Model::step(int32_t token, State& state, std::span<float> logits) const {
  forward(std::span<const int32_t>(&token, 1), state, logits);
}

std::vector<float> Model::forward_batch(std::span<const std::span<const int32_t>> sequences,
                                        std::span<State* const> states) const {
  std::vector<float> out;
  run(*impl_, *runtime_, attention_, precision_, sequences, states, Rows::kLastOfEach,
      Output::kLogits, nullptr, Dest{&out, {}}, adapter_.get());
  return out;
}

void Model::forward_batch(std::span<const std::span<const int32_t>> sequences,
                          std::span<State* const> states, std::span<float> logits,
                          bool all_positions) const {
  run(*impl_, *runtime_, attention_, precision_, sequences, states,
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kLogits, nullptr,
      Dest{nullptr, logits}, adapter_.get());
}

std::vector<float> Model::step_batch(std::span<const int32_t> tokens,
                                     std::span<State* const> states) const {
  std::vector<float> out(tokens.size() * static_cast<size_t>(impl_->geometry.vocab));
  step_batch(tokens, states, out);
  return out;
}

void Model::step_batch(std::span<const int32_t> tokens, std::span<State* const> states,
                       std::span<float> logits) const {
  std::vector<std::span<const int32_t>> seqs;
  seqs.reserve(tokens.size());
  for (const int32_t& t : tokens) seqs.emplace_back(&t, 1);
  run(*impl_, *runtime_, attention_, precision_, seqs, states, Rows::kLastOfEach, Output::kLogits,
      nullptr, Dest{nullptr, logits}, adapter_.get());
}

std::vector<float> Model::hidden(std::span<const int32_t> tokens, State& state,
                                 bool all_positions) const {
  State* st = &state;
  std::vector<float> out;
  run(*impl_, *runtime_, attention_, precision_, one(tokens), std::span<State* const>(&st, 1),
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kHidden, nullptr, Dest{&out, {}},
      adapter_.get());
  return out;
}

std::vector<float> Model::hidden_batch(std::span<const std::span<const int32_t>> sequences,
                                       std::span<State* const> states, bool all_positions) const {
  std::vector<float> out;
  run(*impl_, *runtime_, attention_, precision_, sequences, states,
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kHidden, nullptr, Dest{&out, {}},
      adapter_.get());
  return out;
}

void Model::forward_batch(std::span<const std::span<const int32_t>> sequences,
                          std::span<State* const> states,
                          std::span<const LoraAdapter* const> adapters, std::span<float> logits,
                          bool all_positions) const {
  if (adapters.size() != sequences.size())
    throw InputError(std::to_string(sequences.size()) + " sequences but " +
                     std::to_string(adapters.size()) +
                     " LoRA adapters: expected one adapter pointer (or null) per sequence");
  run(*impl_, *runtime_, attention_, precision_, sequences, states,
      all_positions ? Rows::kAll : Rows::kLastOfEach, Output::kLogits, nullptr,
      Dest{nullptr, logits}, adapter_.get(), adapters);
}

void Model::step_batch(std::span<const int32_t> tokens, std::span<State* const> states,
                       std::span<const LoraAdapter* const> adapters,
                       std::span<float> logits) const {
  std::vector<std::span<const int32_t>> seqs;
  seqs.reserve(tokens.size());
  for (const int32_t& t : tokens) seqs.emplace_back(&t, 1);
  forward_batch(seqs, states, adapters, logits);
}

void Model::absorb_batch(std::span<const std::span<const int32_t>> sequences,
                         std::span<State* const> states,
                         std::span<const LoraAdapter* const> adapters) const {
  if (adapters.size() != sequences.size())
    throw InputError(std::to_string(sequences.size()) + " sequences but " +
                     std::to_string(adapters.size()) +
                     " LoRA adapters: expected one adapter pointer (or null) per sequence");
  run(*impl_, *runtime_, attention_, precision_, sequences, states, Rows::kNone, Output::kHidden,
      nullptr, Dest{}, adapter_.get(), adapters);
}

void Model::absorb_batch(std::span<const std::span<const int32_t>> sequences,
                         std::span<State* const> states) const {
  run(*impl_, *runtime_, attention_, precision_, sequences, states, Rows::kNone, Output::kHidden,
      nullptr, Dest{}, adapter_.get());
}

}  // namespace wick
