// The Model handle (wick/model.h): construction from built weights, the views that share them
// (with_runtime, with_precision, with_attention), the accessors, and the names of the options.
// Loading is model/loader.cpp, the passes model/forward.cpp, adapters model/lora.cpp.
#include "wick/model.h"

#include <string>

#include "model/model_impl.h"
#include "wick/errors.h"

namespace wick {

Model Model::with_runtime(std::shared_ptr<Runtime> runtime) const {
  if (!runtime) throw InputError("Model::with_runtime: the runtime must not be null");
  Model m = *this;
  m.runtime_ = std::move(runtime);
  return m;
}

Model Model::with_precision(Precision p) const {
  Model m = *this;
  m.precision_ = p;
  return m;
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

Model::Model(std::shared_ptr<const Impl> impl, std::shared_ptr<Runtime> runtime)
    : impl_(std::move(impl)), runtime_(std::move(runtime)), attention_(impl_->default_attention) {}

Model Model::from_impl(std::shared_ptr<const Impl> impl) {
  return Model(std::move(impl), std::make_shared<Runtime>());
}

Model Model::with_attention(const AttentionOptions& o) const {
  if (o.moba_block < 1 || o.moba_topk < 1 || o.kv_max < 0) {
    throw InputError("invalid attention options: moba block " + std::to_string(o.moba_block) +
                     ", top-k " + std::to_string(o.moba_topk) + ", kv_max " +
                     std::to_string(o.kv_max) +
                     "; expected a block size >= 1, a top-k >= 1 and a kv_max >= 0 (0 = no limit)");
  }
  Model m = *this;
  m.attention_ = o;
  return m;
}

std::string_view attention_mode_name(AttentionMode m) {
  return m == AttentionMode::kMoba ? "moba" : "full";
}
std::string_view moba_scope_name(MobaScope s) {
  return s == MobaScope::kPerHead ? "per_head" : "shared";
}

const Geometry& Model::geometry() const {
  return impl_->geometry;
}
const ModelInfo& Model::info() const {
  return adapted_info_ ? *adapted_info_ : impl_->info;
}
State Model::new_state() const {
  const Geometry& g = impl_->geometry;
  return State(g.n_layer, g.n_embd, g.n_head, g.head_size, g.n_attn);
}

bool Model::has_lm_head() const {
  return impl_->weights.head != nullptr;
}

}  // namespace wick
