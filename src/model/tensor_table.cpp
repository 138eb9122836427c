// The rows of the tensor table (model/tensor_table.h).
#include "model/tensor_table.h"

#include "wick/errors.h"

namespace wick::model {
namespace {

using D = Dim;
using R = Role;
using P = Presence;
using LW = LayerWeights;
using AW = AttentionBlockWeights;
using MW = ModelWeights;

constexpr LayerSpec norm(std::string_view n, std::vector<float> LW::*m, P p = P::kAlways) {
  return {n, R::kNorm, D::kC, D::kOne, p, false, "", "", m};
}
constexpr LayerSpec vec(std::string_view n, std::vector<float> LW::*m, P p = P::kAlways) {
  return {n, R::kVector, D::kC, D::kOne, p, false, "", "", m};
}
constexpr LayerSpec lora(std::string_view n, R role, D rank, std::string_view about,
                         std::unique_ptr<Linear> LW::*m, P p = P::kAlways) {
  const bool down = role == R::kLoraDown;
  return {n, role, down ? rank : D::kC, down ? D::kC : rank, p, false, "", about, nullptr, m};
}
constexpr LayerSpec proj(std::string_view n, D out, D in, std::string_view trace,
                         std::unique_ptr<Linear> LW::*m) {
  return {n, R::kProjection, out, in, P::kAlways, true, trace, "", nullptr, m};
}

// The official state dict's order (the synthetic generator writes the tensors in it).
constexpr LayerSpec kLayer[] = {
    norm("ln1.weight", &LW::ln1_w),
    norm("ln1.bias", &LW::ln1_b, P::kNormBias),
    norm("ln2.weight", &LW::ln2_w),
    norm("ln2.bias", &LW::ln2_b, P::kNormBias),
    vec("att.x_r", &LW::x_r),
    vec("att.x_w", &LW::x_w),
    vec("att.x_k", &LW::x_k),
    vec("att.x_v", &LW::x_v),
    vec("att.x_a", &LW::x_a),
    vec("att.x_g", &LW::x_g),
    vec("att.w0", &LW::w0),
    lora("att.w1", R::kLoraDown, D::kDw, "decay LoRA down", &LW::w1),
    lora("att.w2", R::kLoraUp, D::kDw, "decay LoRA up", &LW::w2),
    vec("att.a0", &LW::a0),
    lora("att.a1", R::kLoraDown, D::kDa, "in-context-rate LoRA down", &LW::a1),
    lora("att.a2", R::kLoraUp, D::kDa, "in-context-rate LoRA up", &LW::a2),
    vec("att.v0", &LW::v0, P::kAfterLayer0),
    lora("att.v1", R::kLoraDown, D::kDv, "value-residual LoRA down", &LW::v1, P::kAfterLayer0),
    lora("att.v2", R::kLoraUp, D::kDv, "value-residual LoRA up", &LW::v2, P::kAfterLayer0),
    lora("att.g1", R::kLoraDown, D::kDg, "gate LoRA down", &LW::g1),
    lora("att.g2", R::kLoraUp, D::kDg, "gate LoRA up", &LW::g2),
    vec("att.k_k", &LW::k_k),
    vec("att.k_a", &LW::k_a),
    {"att.r_k", R::kHeadMatrix, D::kH, D::kN, P::kAlways, false, "", "", &LW::r_k},
    proj("att.receptance.weight", D::kC, D::kC, "in.att.receptance", &LW::receptance),
    proj("att.key.weight", D::kC, D::kC, "in.att.key", &LW::key),
    proj("att.value.weight", D::kC, D::kC, "in.att.value", &LW::value),
    proj("att.output.weight", D::kC, D::kC, "in.att.output", &LW::output),
    norm("att.ln_x.weight", &LW::ln_x_w),
    norm("att.ln_x.bias", &LW::ln_x_b),
    vec("ffn.x_k", &LW::ffn_x_k),
    proj("ffn.key.weight", D::kF, D::kC, "in.ffn.key", &LW::ffn_key),
    proj("ffn.value.weight", D::kC, D::kF, "in.ffn.value", &LW::ffn_value),
};

constexpr AttentionSpec anorm(std::string_view n, std::vector<float> AW::*m) {
  return {n, R::kNorm, D::kC, D::kOne, P::kAlways, false, "", "", m};
}
constexpr AttentionSpec aproj(std::string_view n, D out, D in, std::string_view about,
                              std::unique_ptr<Linear> AW::*m) {
  return {n, R::kProjection, out, in, P::kAlways, true, "", about, nullptr, m};
}

constexpr AttentionSpec kAttention[] = {
    anorm("ln1.weight", &AW::ln1_w),
    anorm("ln1.bias", &AW::ln1_b),
    anorm("ln2.weight", &AW::ln2_w),
    anorm("ln2.bias", &AW::ln2_b),
    aproj("att.receptance.weight", D::kC, D::kC, "the query projection", &AW::query),
    aproj("att.key.weight", D::kC, D::kC, "", &AW::key),
    aproj("att.value.weight", D::kC, D::kC, "", &AW::value),
    aproj("att.output.weight", D::kC, D::kC, "", &AW::output),
    {"ffn.x_k", R::kVector, D::kC, D::kOne, P::kAlways, false, "", "", &AW::ffn_x_k},
    aproj("ffn.key.weight", D::kFa, D::kC, "", &AW::ffn_key),
    aproj("ffn.value.weight", D::kC, D::kFa, "", &AW::ffn_value),
};

constexpr ModelSpec kModel[] = {
    {"emb.weight", R::kEmbedding, D::kV, D::kC, P::kAlways, false, "", "", nullptr, nullptr,
     &MW::emb},
    {"blocks.0.ln0.weight", R::kNorm, D::kC, D::kOne, P::kNormFirst, false, "", "", &MW::ln0_w},
    {"blocks.0.ln0.bias", R::kNorm, D::kC, D::kOne, P::kNormFirstBias, false, "", "", &MW::ln0_b},
    {"ln_out.weight", R::kNorm, D::kC, D::kOne, P::kAlways, false, "", "", &MW::ln_out_w},
    {"ln_out.bias", R::kNorm, D::kC, D::kOne, P::kNormBias, false, "", "", &MW::ln_out_b},
    {"head.weight", R::kProjection, D::kV, D::kC, P::kHead, true, "in.head", "", nullptr,
     &MW::head},
};

}  // namespace

std::span<const LayerSpec> layer_tensors() {
  return kLayer;
}
std::span<const AttentionSpec> attention_tensors() {
  return kAttention;
}
std::span<const ModelSpec> model_tensors() {
  return kModel;
}
bool before_blocks(const ModelSpec& s) {
  return s.name.rfind("blocks.0.ln0.", 0) == 0 || s.role == Role::kEmbedding;
}

namespace {

template <class W>
std::string_view trace_of(std::span<const TensorSpec<W>> table,
                          std::unique_ptr<Linear> W::*member) {
  for (const TensorSpec<W>& s : table)
    if (s.lin == member && !s.trace.empty()) return s.trace;
  throw InternalError("input_trace: no row of the tensor table traces this projection's input");
}

}  // namespace

std::string_view input_trace(std::unique_ptr<Linear> LayerWeights::*member) {
  return trace_of(layer_tensors(), member);
}
std::string_view input_trace(std::unique_ptr<Linear> ModelWeights::*member) {
  return trace_of(model_tensors(), member);
}

int64_t dim_value(Dim d, const Geometry& g) {
  switch (d) {
    case Dim::kOne:
      return 1;
    case Dim::kC:
      return g.n_embd;
    case Dim::kF:
      return g.ffn_dim;
    case Dim::kFa:
      return g.attn_ffn_dim;
    case Dim::kH:
      return g.n_head;
    case Dim::kN:
      return g.head_size;
    case Dim::kV:
      return g.vocab;
    case Dim::kDw:
      return g.lora_w;
    case Dim::kDa:
      return g.lora_a;
    case Dim::kDv:
      return g.lora_v;
    case Dim::kDg:
      return g.lora_g;
  }
  return 0;
}

std::string_view dim_letter(Dim d) {
  switch (d) {
    case Dim::kOne:
      return "1";
    case Dim::kC:
      return "C";
    case Dim::kF:
      return "F";
    case Dim::kFa:
      return "F_a";
    case Dim::kH:
      return "H";
    case Dim::kN:
      return "N";
    case Dim::kV:
      return "V";
    case Dim::kDw:
      return "D_w";
    case Dim::kDa:
      return "D_a";
    case Dim::kDv:
      return "D_v";
    case Dim::kDg:
      return "D_g";
  }
  return "?";
}

}  // namespace wick::model
