// Synthetic checkpoints (include/wick/synth.h).
//
// Initialisation design. The goal is a random model whose activations look like a trained
// RWKV-7's - every branch active, residual stream O(1), decays spread from fast to slow - so that
// it runs the real code paths with realistic numbers, stays finite over long contexts and produces
// varied tokens. It follows the official x070 init recipe (RWKV-LM RWKV-v7/train_temp/src/
// model.py, RWKV_Tmix_x070 / RWKV_CMix_x070 / generate_init_weight) for the per-channel vectors,
// and replaces that recipe's zero-initialised matrices (output, ffn.value, the first LoRA factors),
// which a trained model moves away from zero, by small random ones. With layer i of L,
// r01 = i/(L-1), r10 = 1 - i/L, c the channel, lin(c) = c/(C-1) - 0.5, zig(c) = the official
// per-head zigzag in [-1, 1] (signed square), z ~ N(0, 1) (see noise() below):
//   * emb ~ N(0, 0.1): small, like trained embeddings; ln0 (weight 1, bias 0) makes each row a
//     unit-variance vector anyway. All LayerNorms: weight 1, bias 0 (the official init).
//   * token-shift mixes x_r/x_w/x_k/x_v/x_a/x_g = 1 - (c/C)^(p r10), p = 0.2/0.9/0.7/0.7/0.9/0.2,
//     and ffn.x_k = 1 - (c/C)^(r10^4) (official), + 0.02 z, clamped to [0.02, 0.98]: every channel
//     mixes in some of the previous token, more in early layers.
//   * decay: w0 = -6 + 6 (c/(C-1))^(1 + r01^0.3) + 0.5 + 2.5 zig(c) (official), in [-8, 3.5], so
//     w = exp(-e^-0.5 sigma(dw)) spans 0.56 (forgets within a few tokens) to 0.9998 (remembers
//     thousands) across channels; the LoRA (w1 ~ N(0, 1/sqrt C), w2 ~ N(0, 0.5/sqrt Dw)) moves
//     dw by about +-0.3 per token - data-dependent, never dominant.
//   * in-context rate a0 = -0.19 + 0.3 zig + 0.4 lin (a about 0.45), value residual
//     v0 = 0.73 - 0.4 lin (official), their LoRAs like the decay's: x1 ~ N(0, 1/sqrt C),
//     x2 ~ N(0, 0.5/sqrt D). Gate g1 ~ N(0, 1/sqrt C), g2 ~ N(0, 1/sqrt Dg): gates of std ~0.5.
//   * k_k = 0.85 - 0.1 lin + 0.02 z, k_a = 1 + 0.02 z, r_k = -0.04 + 0.1 z (small bonus term).
//   * receptance, value ~ N(0, 1/sqrt C) (unit-variance r and v from unit-variance inputs), key
//     ~ N(0, 0.5/sqrt C) (keys smaller than r and v, as in the official init), so the WKV state
//     of a slow head grows only like sqrt(1/(1 - w)) and GroupNorm rescales the read-out.
//   * ln_x weight = ((1+i)/L)^0.7, bias 0 (official layer scale: later layers' attention
//     speaks louder); output ~ N(0, 0.5/sqrt C), ffn.key ~ N(0, 1/sqrt C),
//     ffn.value ~ N(0, 0.5/sqrt F): each block adds about 0.2-0.5 to a unit-variance residual
//     stream, so even 32 layers keep it O(1-10) and no branch swamps the others.
//   * ln_out weight 1, bias 0; head ~ N(0, 2/sqrt C): logits of std ~2, a softmax neither flat
//     nor one-hot.
// Measured (bf16; tests/model/test_synth.cpp checks the first three): after 4096 random tokens
// logits and state are finite, the largest |state| entry is about 6, per-token decays cover
// about 0.56 to 0.9998; greedy decoding gives 56-64 distinct tokens out of 64; the residual
// stream's rms grows from 1.1 to 2.2 over the 12 layers of 0.1b, logits have std about 2.
//
// Random numbers. Element e of tensor `name` uses the e-th output of a wick::SplitMix64 stream
// whose start is derived from (seed, name). SplitMix64's state advances by a fixed odd constant,
// so the e-th output is SplitMix64(start + e * gamma).next(): random access, so the values do not
// depend on how the file is chunked or how many threads fill it. A normal variate is made from
// the four 16-bit quarters of one output (Irwin-Hall: sum of 4 uniforms, centred and scaled to
// unit variance, tails bounded at +-3.46): integer arithmetic plus one correctly rounded multiply,
// no libm, so the noise is identical everywhere.
#include "wick/synth.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "base/fp16.h"
#include "io/safetensors_writer.h"
#include "kernels/thread_pool.h"
#include "model/tensor_table.h"
#include "wick/errors.h"
#include "wick/rng.h"
#include "wick/runtime.h"

namespace wick {
namespace {

using model::AttentionSpec;
using model::LayerSpec;
using model::ModelSpec;
using model::Role;

// SplitMix64's increment (include/wick/rng.h): SplitMix64(s + n * kGamma).next() is the n-th
// (0-based) output of SplitMix64(s). tests/model/test_synth.cpp checks this against rng.h.
constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Start of the stream of tensor `name`.
uint64_t stream_start(uint64_t seed, std::string_view name) {
  SplitMix64 s(seed);
  return SplitMix64(s.next() ^ fnv1a64(name)).next();
}

// Approximately N(0, 1): Irwin-Hall of 4 uniforms (k + 1/2) / 2^16 from the quarters of the e-th
// output of the stream at `start`.
inline float noise(uint64_t start, uint64_t e) {
  const uint64_t r = SplitMix64(start + e * kSplitMixGamma).next();
  const int64_t s = static_cast<int64_t>(r & 0xffff) + static_cast<int64_t>((r >> 16) & 0xffff) +
                    static_cast<int64_t>((r >> 32) & 0xffff) + static_cast<int64_t>(r >> 48) + 2 -
                    131072;  // 2^16 * (sum of the 4 uniforms - 2), exact
  constexpr double kScale = 1.7320508075688772 / 65536.0;  // sqrt(3) (variance 1/3 -> 1) / 2^16
  return static_cast<float>(static_cast<double>(s) * kScale);
}

// Round-to-nearest-even conversions (base/fp16.h); little-endian stores.
template <DType D>
inline void store(char* p, float v) {
  if constexpr (D == DType::F32) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int b = 0; b < 4; ++b) p[b] = static_cast<char>((u >> (8 * b)) & 0xff);
  } else {
    const uint16_t h = D == DType::BF16 ? base::f32_to_bf16(v) : base::f32_to_f16(v);
    p[0] = static_cast<char>(h & 0xff);
    p[1] = static_cast<char>(h >> 8);
  }
}

// How to fill one tensor: value = mean + stddev * z, or fn(e, z) for the per-channel vectors
// (e = flat element index, which is the channel for every vector here).
struct Recipe {
  io::TensorSpec spec;
  uint64_t start = 0;
  float mean = 0.0f, stddev = 0.0f;
  std::function<float(int64_t e, float z)> fn;
};

template <DType D>
void fill_chunk(const Recipe& r, uint64_t first, char* out, int64_t n) {
  constexpr int64_t es = static_cast<int64_t>(dtype_size(D));
  if (r.fn) {
    for (int64_t j = 0; j < n; ++j) {
      const uint64_t e = first + static_cast<uint64_t>(j);
      store<D>(out + j * es, r.fn(static_cast<int64_t>(e), noise(r.start, e)));
    }
    return;
  }
  const float mean = r.mean, sd = r.stddev;
  const uint64_t start = r.start;
  // Every element is a function of its index alone: any split over threads gives the same bytes.
  constexpr int64_t kBlock = int64_t{1} << 16;
  auto fill = [&](int64_t b) {
    for (int64_t j = b * kBlock; j < std::min(n, (b + 1) * kBlock); ++j) {
      const float z = noise(start, first + static_cast<uint64_t>(j));
      store<D>(out + j * es, mean + sd * z);
    }
  };
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks <= 1) return fill(0);
  kernels::ThreadPool pool(default_thread_count());
  pool.run(blocks, fill);
}

std::vector<Recipe> make_recipes(const SynthGeometry& sg, DType dtype, uint64_t seed) {
  const Geometry& g = sg.geometry;
  const int L = g.n_layer;
  const int64_t C = g.n_embd, N = g.head_size, F = g.ffn_dim;
  const int64_t rv = synth_lora_rank(g.n_embd, 1.3, 0.5);  // also block 0's (unused) v1/v2
  const float isC = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
  auto inv_sqrt = [](int64_t n) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  };

  std::vector<Recipe> out;
  auto normal = [&](std::string name, std::vector<int64_t> shape, float mean, float sd) {
    Recipe r;
    r.spec = {name, dtype, std::move(shape)};
    r.start = stream_start(seed, name);
    r.mean = mean;
    r.stddev = sd;
    out.push_back(std::move(r));
  };
  auto vec = [&](std::string name, std::vector<int64_t> shape,
                 std::function<float(int64_t, float)> fn) {
    Recipe r;
    r.spec = {name, dtype, std::move(shape)};
    r.start = stream_start(seed, name);
    r.fn = std::move(fn);
    out.push_back(std::move(r));
  };
  auto lin = [C](int64_t c) { return static_cast<float>(static_cast<double>(c) / (C - 1) - 0.5); };
  auto zig = [N](int64_t c) {
    const double h = (N - 1) / 2.0;
    const double z = (static_cast<double>(c % N) - h) / h;
    return static_cast<float>(z * std::fabs(z));
  };
  auto clamp_mix = [](double m) { return static_cast<float>(std::clamp(m, 0.02, 0.98)); };

  // Every tensor of the table (model/tensor_table.h) in its order, with its official shape; what
  // differs per tensor here is only its distribution. Block 0 gets v0/v1/v2 too, as the official
  // checkpoints have them (unused there), with the rank the other blocks use.
  Geometry tg = g;
  tg.lora_v = static_cast<int>(rv);
  auto no_recipe = [](std::string_view name) {
    throw InternalError("wick synth: no distribution for the tensor table's row '" +
                        std::string(name) + "' (src/synth/synth.cpp)");
  };
  // Norms: weight 1 (ln_x's grows with depth), bias 0.
  auto norm = [&](const std::string& name, std::vector<int64_t> shape, float weight) {
    const bool bias = name.ends_with(".bias");
    normal(name, std::move(shape), bias ? 0.0f : weight, 0.0f);
  };
  auto mix = [&](const std::string& name, std::vector<int64_t> shape, double e) {
    vec(name, std::move(shape), [C, e, clamp_mix](int64_t c, float z) {
      return clamp_mix(1.0 - std::pow(static_cast<double>(c) / C, e) + 0.02 * z);
    });
  };
  for (const ModelSpec& s : model::model_tensors()) {
    if (!model::before_blocks(s)) continue;
    const std::string name(s.name);
    if (s.role == Role::kEmbedding) {
      normal(name, model::official_shape(s, tg), 0.0f, 0.1f);
    } else {
      norm(name, model::official_shape(s, tg), 1.0f);
    }
  }
  for (int i = 0; i < L; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const double r01 = L > 1 ? static_cast<double>(i) / (L - 1) : 0.0;
    const double r10 = 1.0 - static_cast<double>(i) / L;
    for (const LayerSpec& s : model::layer_tensors()) {
      const std::string_view n = s.name;
      const std::string name = p + std::string(n);
      std::vector<int64_t> shape = model::official_shape(s, tg);
      switch (s.role) {
        case Role::kNorm:
          norm(name, std::move(shape),
               n == "att.ln_x.weight"
                   ? static_cast<float>(std::pow(static_cast<double>(i + 1) / L, 0.7))
                   : 1.0f);
          break;
        case Role::kLoraDown:
          normal(name, std::move(shape), 0.0f, isC);
          break;
        case Role::kLoraUp:  // the gate's up factor is twice as loud
          normal(name, std::move(shape), 0.0f,
                 (n == "att.g2" ? 1.0f : 0.5f) * inv_sqrt(model::dim_value(s.cols, tg)));
          break;
        case Role::kHeadMatrix:  // r_k
          normal(name, std::move(shape), -0.04f, 0.1f);
          break;
        case Role::kProjection:
          if (n == "ffn.value.weight") {
            normal(name, std::move(shape), 0.0f, 0.5f * inv_sqrt(F));
          } else {
            const bool half = n == "att.key.weight" || n == "att.output.weight";
            normal(name, std::move(shape), 0.0f, half ? 0.5f * isC : isC);
          }
          break;
        case Role::kVector:
          if (n == "att.x_r" || n == "att.x_g") {
            mix(name, std::move(shape), 0.2 * r10);
          } else if (n == "att.x_w" || n == "att.x_a") {
            mix(name, std::move(shape), 0.9 * r10);
          } else if (n == "att.x_k" || n == "att.x_v") {
            mix(name, std::move(shape), 0.7 * r10);
          } else if (n == "ffn.x_k") {
            mix(name, std::move(shape), std::pow(r10, 4.0));
          } else if (n == "att.w0") {
            vec(name, std::move(shape), [C, r01, zig](int64_t c, float) {
              const double t = static_cast<double>(c) / (C - 1);
              return static_cast<float>(-6.0 + 6.0 * std::pow(t, 1.0 + std::pow(r01, 0.3)) + 0.5 +
                                        2.5 * zig(c));
            });
          } else if (n == "att.a0") {
            vec(name, std::move(shape),
                [lin, zig](int64_t c, float) { return -0.19f + 0.3f * zig(c) + 0.4f * lin(c); });
          } else if (n == "att.v0") {
            vec(name, std::move(shape), [lin](int64_t c, float) { return 0.73f - 0.4f * lin(c); });
          } else if (n == "att.k_k") {
            vec(name, std::move(shape),
                [lin](int64_t c, float z) { return 0.85f - 0.1f * lin(c) + 0.02f * z; });
          } else if (n == "att.k_a") {
            normal(name, std::move(shape), 1.0f, 0.02f);
          } else {
            no_recipe(name);
          }
          break;
        case Role::kEmbedding:
          no_recipe(name);
      }
    }
  }
  for (const ModelSpec& s : model::model_tensors()) {
    if (model::before_blocks(s)) continue;
    const std::string name(s.name);
    if (s.role == Role::kProjection) {
      normal(name, model::official_shape(s, tg), 0.0f, 2.0f * isC);  // the head
    } else {
      norm(name, model::official_shape(s, tg), 1.0f);
    }
  }
  if (g.n_attn == 0) return out;
  // RWKV-X: the x070 part under `rwkv.`, then the attention blocks `moba.{j}.*` (docs/rwkvx.md
  // §3). Queries and keys have unit variance per channel after ln1, so q·k/8 spreads about 1:
  // attention is selective without saturating.
  for (Recipe& r : out) r.spec.name = "rwkv." + r.spec.name;
  for (int j = 0; j < g.n_attn; ++j) {
    const std::string p = "moba." + std::to_string(j) + ".";
    for (const AttentionSpec& s : model::attention_tensors()) {
      const std::string_view n = s.name;
      const std::string name = p + std::string(n);
      std::vector<int64_t> shape = model::official_shape(s, tg);
      if (s.role == Role::kNorm) {
        norm(name, std::move(shape), 1.0f);
      } else if (s.role == Role::kVector) {  // ffn.x_k
        vec(name, std::move(shape),
            [clamp_mix](int64_t, float z) { return clamp_mix(0.5 + 0.02 * z); });
      } else if (n == "ffn.value.weight") {
        normal(name, std::move(shape), 0.0f, 0.5f * inv_sqrt(g.attn_ffn_dim));
      } else {
        normal(name, std::move(shape), 0.0f, n == "att.output.weight" ? 0.5f * isC : isC);
      }
    }
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

const char* kGeometryForms =
    "expected 0.1b, 0.4b, 1.5b, 2.9b, rwkvx-0.2b, rwkvx-3.6b or L:C[:vocab] with decimal integers "
    "(e.g. 12:768 or 2:128:512; add --attention-blocks for an RWKV-X hybrid)";

}  // namespace

int synth_lora_rank(int n_embd, double k, double e) {
  // std::nearbyint in the default rounding mode rounds half to even, like Python's round().
  const double r = std::nearbyint(k * std::pow(static_cast<double>(n_embd), e) / 32.0) * 32.0;
  return std::max(32, static_cast<int>(r));
}

SynthGeometry make_synth_geometry(int n_layer, int n_embd, int vocab, int n_attn) {
  if (n_layer < 1 || n_layer > kSynthMaxLayers) {
    throw InputError("synthetic geometry: the number of layers L must be in [1, " +
                     std::to_string(kSynthMaxLayers) + "], found " + std::to_string(n_layer));
  }
  if (n_embd < kSynthHeadSize || n_embd > kSynthMaxEmbd || n_embd % kSynthHeadSize != 0) {
    throw InputError(
        "synthetic geometry: the width C must be a multiple of 64 (the head size) in [64, " +
        std::to_string(kSynthMaxEmbd) + "], found " + std::to_string(n_embd));
  }
  if (vocab < 1 || vocab > kSynthMaxVocab) {
    throw InputError("synthetic geometry: the vocabulary V must be in [1, " +
                     std::to_string(kSynthMaxVocab) + "], found " + std::to_string(vocab));
  }
  if (n_attn < 0 || (n_attn > 0 && n_layer % n_attn != 0)) {
    throw InputError("synthetic geometry: " + std::to_string(n_attn) + " attention blocks for " +
                     std::to_string(n_layer) +
                     " layers; RWKV-X needs the layer count to be a multiple of the attention "
                     "blocks (each follows a group of L / N_a RWKV blocks)");
  }
  SynthGeometry s;
  s.label = std::to_string(n_layer) + ":" + std::to_string(n_embd) + ":" + std::to_string(vocab);
  if (n_attn > 0) s.label += "+" + std::to_string(n_attn) + "a";
  Geometry& g = s.geometry;
  g.n_layer = n_layer;
  g.n_embd = n_embd;
  g.head_size = kSynthHeadSize;
  g.n_head = n_embd / kSynthHeadSize;
  g.ffn_dim = 4 * n_embd;
  g.vocab = vocab;
  g.lora_w = synth_lora_rank(n_embd, 1.8, 0.5);
  g.lora_a = synth_lora_rank(n_embd, 1.8, 0.5);
  g.lora_v = n_layer > 1 ? synth_lora_rank(n_embd, 1.3, 0.5) : 0;
  g.lora_g = synth_lora_rank(n_embd, 0.6, 0.8);
  g.n_attn = n_attn;
  g.attn_ffn_dim = n_attn > 0 ? 4 * n_embd : 0;
  return s;
}

SynthGeometry parse_synth_geometry(std::string_view spec) {
  const std::string s = lower(spec);
  static const std::map<std::string, std::pair<int, int>> kNamed = {
      {"0.1b", {12, 768}}, {"0.4b", {24, 1024}}, {"1.5b", {24, 2048}}, {"2.9b", {32, 2560}}};
  if (auto it = kNamed.find(s); it != kNamed.end()) {
    SynthGeometry g = make_synth_geometry(it->second.first, it->second.second, kSynthDefaultVocab);
    g.label = it->first;
    return g;
  }
  // The released RWKV-X sizes (docs/rwkvx.md §5): 0.2B = 12 RWKV + 4 attention blocks at C 768,
  // 3.6B = 32 + 8 at C 2560.
  static const std::map<std::string, std::array<int, 3>> kNamedX = {{"rwkvx-0.2b", {12, 768, 4}},
                                                                    {"rwkvx-3.6b", {32, 2560, 8}}};
  if (auto it = kNamedX.find(s); it != kNamedX.end()) {
    SynthGeometry g =
        make_synth_geometry(it->second[0], it->second[1], kSynthDefaultVocab, it->second[2]);
    g.label = it->first;
    return g;
  }
  const std::string found = "'" + std::string(spec) + "'";
  std::vector<int> parts;
  size_t pos = 0;
  while (true) {
    const size_t colon = s.find(':', pos);
    const std::string_view field = std::string_view(s).substr(
        pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (field.empty() || field.size() > 9 ||
        !std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw InputError("invalid synthetic geometry " + found + ": " + kGeometryForms +
                       (field.empty()
                            ? "; a field is empty"
                            : "; '" + std::string(field) + "' is not a number below 10^9"));
    }
    int v = 0;
    std::from_chars(field.data(), field.data() + field.size(), v);
    parts.push_back(v);
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    throw InputError("invalid synthetic geometry " + found + ": " + kGeometryForms + "; found " +
                     std::to_string(parts.size()) + " field" + (parts.size() == 1 ? "" : "s"));
  }
  try {
    return make_synth_geometry(parts[0], parts[1],
                               parts.size() == 3 ? parts[2] : kSynthDefaultVocab);
  } catch (const InputError& e) {
    throw InputError("invalid synthetic geometry " + found + ": " +
                     std::string(e.what()).substr(std::string("synthetic geometry: ").size()));
  }
}

DType parse_synth_dtype(std::string_view name) {
  const std::string s = lower(name);
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "f16" || s == "float16") return DType::F16;
  if (s == "fp32" || s == "f32" || s == "float32") return DType::F32;
  throw InputError("invalid dtype '" + std::string(name) + "': expected bf16, fp16 or fp32");
}

std::string_view synth_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "fp16";
    case DType::F32:
      return "fp32";
    default:
      return "?";
  }
}

SynthSummary write_synthetic_checkpoint(const std::string& path, const SynthGeometry& geometry,
                                        DType dtype, uint64_t seed, size_t chunk_bytes) {
  if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F32) {
    throw InputError("synthetic checkpoint: expected dtype bf16, fp16 or fp32, found " +
                     std::string(dtype_name(dtype)));
  }
  const Geometry& g = geometry.geometry;
  const SynthGeometry expect = make_synth_geometry(g.n_layer, g.n_embd, g.vocab, g.n_attn);
  if (!(expect.geometry == g)) {
    throw InputError("synthetic checkpoint: geometry '" + geometry.label +
                     "' is not one make_synth_geometry() derives (head size 64, F = 4C, LoRA "
                     "ranks by the official rule); build it with parse_synth_geometry()");
  }
  const std::vector<Recipe> recipes = make_recipes(geometry, dtype, seed);
  std::vector<io::TensorSpec> specs;
  specs.reserve(recipes.size());
  SynthSummary sum;
  for (const Recipe& r : recipes) {
    specs.push_back(r.spec);
    uint64_t n = 1;
    for (int64_t d : r.spec.shape) n *= static_cast<uint64_t>(d);
    sum.parameters += n;
  }
  sum.tensors = recipes.size();
  const std::map<std::string, std::string> metadata = {
      {"wick.synth", "1"},
      {"wick.synth.geometry", geometry.label},
      {"wick.synth.dims",
       "L=" + std::to_string(g.n_layer) + " C=" + std::to_string(g.n_embd) +
           " H=" + std::to_string(g.n_head) + " N=" + std::to_string(g.head_size) +
           " F=" + std::to_string(g.ffn_dim) + " V=" + std::to_string(g.vocab) +
           " lora_w=" + std::to_string(g.lora_w) + " lora_a=" + std::to_string(g.lora_a) +
           " lora_v=" + std::to_string(synth_lora_rank(g.n_embd, 1.3, 0.5)) +
           " lora_g=" + std::to_string(g.lora_g)},
      {"wick.synth.dtype", std::string(synth_dtype_name(dtype))},
      {"wick.synth.attention_blocks", std::to_string(g.n_attn)},
      {"wick.synth.seed", std::to_string(seed)},
      {"wick.synth.note",
       "random weights made by `wick synth` (not a trained model): right sizes and sane numerics "
       "for benchmarks and trials; the text it generates is meaningless"},
  };
  const size_t es = dtype_size(dtype);
  auto fill = [&](size_t index, uint64_t offset, std::span<char> out) {
    const Recipe& r = recipes[index];
    const uint64_t first = offset / es;
    const int64_t n = static_cast<int64_t>(out.size() / es);
    switch (dtype) {
      case DType::BF16:
        fill_chunk<DType::BF16>(r, first, out.data(), n);
        break;
      case DType::F16:
        fill_chunk<DType::F16>(r, first, out.data(), n);
        break;
      default:
        fill_chunk<DType::F32>(r, first, out.data(), n);
        break;
    }
  };
  sum.file_bytes = io::write_safetensors_streaming(path, specs, metadata, fill, chunk_bytes);
  return sum;
}

}  // namespace wick
