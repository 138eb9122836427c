// The x070 block arithmetic (docs/x070-math.md §3-4), written once over T rows. The parallel pass
// runs it with T = prompt length (GEMMs, the WKV recurrence looped inside one kernel); the
// recurrent step runs it with T = 1 (GEMVs). Both read weights only through Linear::apply.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/dot.h"
#include "kernels/norm.h"
#include "kernels/wkv7.h"
#include "model/model_impl.h"
#include "wick/errors.h"

namespace wick {
namespace {

using model::LayerWeights;
using model::ModelWeights;

constexpr double kLayerNormEps = 1e-5;
constexpr double kGroupNormEps = 64e-5;  // deliberate constant (docs/x070-math.md §1.3)
constexpr float kL2NormEps = 1e-12f;
constexpr float kDecayScale = 0.6065306597126334f;  // e^(-1/2)

inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// Scratch buffers for one pass, sized for T rows.
struct Workspace {
  explicit Workspace(const Geometry& g, int64_t T) {
    const int64_t C = g.n_embd;
    const int64_t D = std::max({g.lora_w, g.lora_a, g.lora_v, g.lora_g, 1});
    auto mk = [&](std::vector<float>& v, int64_t cols) { v.assign(static_cast<size_t>(T * cols), 0.f); };
    for (auto* v : {&x, &xa, &xr, &xw, &xk, &xv, &xaa, &xg, &r, &k, &v, &w, &a, &g_, &kk, &y, &tmpc,
                    &v_first, &xb})
      mk(*v, C);
    mk(lora, D);
    mk(ffn_h, g.ffn_dim);
  }
  std::vector<float> x, xa, xr, xw, xk, xv, xaa, xg, r, k, v, w, a, g_, kk, y, tmpc, v_first, xb;
  std::vector<float> lora, ffn_h;
};

void trace_out(const ActivationTrace* trace, const char* name, int layer, const float* data,
               int64_t rows, int64_t cols) {
  if (trace && *trace) (*trace)(name, layer, data, rows, cols);
}

// LayerNorm (eps 1e-5) of each of T rows of C channels; an empty bias means zero.
void layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b,
                     float* y, int64_t T, int64_t C) {
  for (int64_t t = 0; t < T; ++t)
    kernels::layer_norm(x + t * C, w.data(), b.empty() ? nullptr : b.data(), y + t * C, C,
                        kLayerNormEps);
}

// out[t] = x[t] + (prev[t] - x[t]) * mix, where prev[0] = shift and prev[t] = x[t-1].
void token_shift_mix(const float* x, const float* shift, const float* mix, float* out, int64_t T,
                     int64_t C) {
  for (int64_t t = 0; t < T; ++t) {
    const float* cur = x + t * C;
    const float* prev = t == 0 ? shift : x + (t - 1) * C;
    float* o = out + t * C;
    for (int64_t c = 0; c < C; ++c) o[c] = cur[c] + (prev[c] - cur[c]) * mix[c];
  }
}

void time_mix(const LayerWeights& L, const Geometry& g, int layer, int64_t T, State& st,
              Workspace& ws, const ActivationTrace* trace) {
  const int64_t C = g.n_embd;
  const int H = g.n_head, N = g.head_size;
  float* x = ws.x.data();
  float* xa = ws.xa.data();
  layer_norm_rows(x, L.ln1_w, L.ln1_b, xa, T, C);
  float* shift = st.att_shift(layer);
  token_shift_mix(xa, shift, L.x_r.data(), ws.xr.data(), T, C);
  token_shift_mix(xa, shift, L.x_w.data(), ws.xw.data(), T, C);
  token_shift_mix(xa, shift, L.x_k.data(), ws.xk.data(), T, C);
  token_shift_mix(xa, shift, L.x_v.data(), ws.xv.data(), T, C);
  token_shift_mix(xa, shift, L.x_a.data(), ws.xaa.data(), T, C);
  token_shift_mix(xa, shift, L.x_g.data(), ws.xg.data(), T, C);
  std::memcpy(shift, xa + (T - 1) * C, C * sizeof(float));

  float *r = ws.r.data(), *k = ws.k.data(), *v = ws.v.data(), *w = ws.w.data(), *a = ws.a.data();
  float *gate = ws.g_.data(), *kk = ws.kk.data(), *lora = ws.lora.data(), *tmp = ws.tmpc.data();
  L.receptance->apply(ws.xr.data(), T, r);
  L.key->apply(ws.xk.data(), T, k);
  L.value->apply(ws.xv.data(), T, v);

  // Decay: w = exp(-e^(-1/2) * sigmoid(w0 + tanh(xw @ w1) @ w2)).
  L.w1->apply(ws.xw.data(), T, lora);
  for (int64_t i = 0; i < T * L.w1->out_features(); ++i) lora[i] = std::tanh(lora[i]);
  L.w2->apply(lora, T, w);
  // In-context learning rate: a = sigmoid(a0 + (xa @ a1) @ a2).
  L.a1->apply(ws.xaa.data(), T, lora);
  L.a2->apply(lora, T, a);
  // Output gate: g = sigmoid(xg @ g1) @ g2.
  L.g1->apply(ws.xg.data(), T, lora);
  for (int64_t i = 0; i < T * L.g1->out_features(); ++i) lora[i] = sigmoid(lora[i]);
  L.g2->apply(lora, T, gate);

  const bool tracing = trace && *trace;
  std::vector<float> logdecay;
  if (tracing) logdecay.resize(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t) {
    float* wt = w + t * C;
    float* at = a + t * C;
    float* kt = k + t * C;
    float* kkt = kk + t * C;
    for (int64_t c = 0; c < C; ++c) {
      const float dw = L.w0[c] + wt[c];
      const float sg = sigmoid(dw);
      if (tracing) logdecay[t * C + c] = std::log(kDecayScale * sg);
      wt[c] = std::exp(-kDecayScale * sg);
      at[c] = sigmoid(L.a0[c] + at[c]);
      kkt[c] = kt[c] * L.k_k[c];
    }
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
  }

  // Value residual: layer 0 remembers its value; later layers mix towards it.
  if (layer == 0) {
    std::memcpy(ws.v_first.data(), v, T * C * sizeof(float));
    trace_out(trace, "v_first", layer, v, T, C);
  } else {
    L.v1->apply(ws.xv.data(), T, lora);
    L.v2->apply(lora, T, tmp);
    for (int64_t i = 0; i < T * C; ++i) {
      const float mix = sigmoid(L.v0[i % C] + tmp[i]);
      v[i] = v[i] + (ws.v_first[i] - v[i]) * mix;
    }
  }

  float* y = ws.y.data();
  kernels::wkv7_sequence(T, H, N, st.wkv(layer), r, w, k, v, kk, a, y);

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
  for (int64_t t = 0; t < T; ++t) {
    float* yt = y + t * C;
    kernels::group_norm(yt, L.ln_x_w.data(), L.ln_x_b.data(), yt, H, N, kGroupNormEps);
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
  }
  L.output->apply(y, T, tmp);
  trace_out(trace, "att_out", layer, tmp, T, C);
  for (int64_t i = 0; i < T * C; ++i) x[i] += tmp[i];
}

void channel_mix(const LayerWeights& L, const Geometry& g, int layer, int64_t T, State& st,
                 Workspace& ws, const ActivationTrace* trace) {
  const int64_t C = g.n_embd, F = g.ffn_dim;
  float* x = ws.x.data();
  float* xb = ws.xb.data();
  layer_norm_rows(x, L.ln2_w, L.ln2_b, xb, T, C);
  float* shift = st.ffn_shift(layer);
  token_shift_mix(xb, shift, L.ffn_x_k.data(), ws.xk.data(), T, C);
  std::memcpy(shift, xb + (T - 1) * C, C * sizeof(float));
  float* h = ws.ffn_h.data();
  L.ffn_key->apply(ws.xk.data(), T, h);
  for (int64_t i = 0; i < T * F; ++i) {
    const float relu = h[i] > 0.f ? h[i] : 0.f;
    h[i] = relu * relu;
  }
  float* out = ws.tmpc.data();
  L.ffn_value->apply(h, T, out);
  trace_out(trace, "ffn_out", layer, out, T, C);
  for (int64_t i = 0; i < T * C; ++i) x[i] += out[i];
}

void embed(const ModelWeights& w, const Geometry& g, const int32_t* tokens, int64_t T, float* x) {
  const int64_t C = g.n_embd;
  for (int64_t t = 0; t < T; ++t) {
    float* row = x + t * C;
    const size_t base = static_cast<size_t>(tokens[t]) * C;
    switch (w.emb_dtype) {
      case DType::F32:
        std::memcpy(row, static_cast<const float*>(w.emb) + base, C * sizeof(float));
        break;
      case DType::F16:
        for (int64_t c = 0; c < C; ++c)
          row[c] = kernels::f16_to_f32(static_cast<const uint16_t*>(w.emb)[base + c]);
        break;
      case DType::BF16:
        for (int64_t c = 0; c < C; ++c)
          row[c] = kernels::bf16_to_f32(static_cast<const uint16_t*>(w.emb)[base + c]);
        break;
      default:
        break;
    }
    if (!w.ln0_w.empty())
      kernels::layer_norm(row, w.ln0_w.data(), w.ln0_b.empty() ? nullptr : w.ln0_b.data(), row, C,
                          kLayerNormEps);
  }
}

void check_inputs(const Geometry& g, std::span<const int32_t> tokens, const State& st) {
  if (tokens.empty()) throw InputError("no tokens given: expected at least one token id");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= g.vocab) {
      throw InputError("token id " + std::to_string(tokens[i]) + " at position " +
                       std::to_string(i) + " is outside this model's vocabulary [0, " +
                       std::to_string(g.vocab) + "); was the text encoded with another tokenizer?");
    }
  }
  if (st.n_layer() != g.n_layer || st.n_embd() != g.n_embd || st.n_head() != g.n_head ||
      st.head_size() != g.head_size) {
    throw InputError("state geometry (L=" + std::to_string(st.n_layer()) + ", C=" +
                     std::to_string(st.n_embd()) + ", H=" + std::to_string(st.n_head()) + ", N=" +
                     std::to_string(st.head_size()) + ") does not match the model (L=" +
                     std::to_string(g.n_layer) + ", C=" + std::to_string(g.n_embd) + ", H=" +
                     std::to_string(g.n_head) + ", N=" + std::to_string(g.head_size) +
                     "); create it with Model::new_state()");
  }
}

std::vector<float> run(const Model::Impl& m, std::span<const int32_t> tokens, State& st,
                       bool all_positions, const ActivationTrace* trace) {
  const Geometry& g = m.geometry;
  check_inputs(g, tokens, st);
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t C = g.n_embd;
  Workspace ws(g, T);
  embed(m.weights, g, tokens.data(), T, ws.x.data());
  trace_out(trace, "emb_ln0", -1, ws.x.data(), T, C);
  for (int i = 0; i < g.n_layer; ++i) {
    time_mix(m.weights.layers[i], g, i, T, st, ws, trace);
    channel_mix(m.weights.layers[i], g, i, T, st, ws, trace);
    trace_out(trace, "block_out", i, ws.x.data(), T, C);
  }
  const int64_t first = all_positions ? 0 : T - 1;
  const int64_t rows = T - first;
  std::vector<float> normed(static_cast<size_t>(rows * C));
  layer_norm_rows(ws.x.data() + first * C, m.weights.ln_out_w, m.weights.ln_out_b, normed.data(),
                  rows, C);
  std::vector<float> logits(static_cast<size_t>(rows * g.vocab));
  m.weights.head->apply(normed.data(), rows, logits.data());
  return logits;
}

}  // namespace

std::vector<float> Model::forward(std::span<const int32_t> tokens, State& state,
                                  bool all_positions, const ActivationTrace* trace) const {
  return run(*impl_, tokens, state, all_positions, trace);
}

std::vector<float> Model::step(int32_t token, State& state) const {
  return run(*impl_, std::span<const int32_t>(&token, 1), state, false, nullptr);
}

}  // namespace wick
