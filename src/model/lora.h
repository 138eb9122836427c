// The loaded form of a LoRA adapter (wick/lora.h) as the passes use it (model/forward.cpp): per
// RWKV layer an optional pair of fp32 factors for each of the six adapted projections, as
// DenseLinears so the same matrix kernels compute the low-rank term, plus the replacement norms.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/linear.h"
#include "model/weights.h"
#include "wick/lora.h"
#include "wick/model.h"

namespace wick::model {

// The adapted projections of an RWKV layer, in tensor-table order.
inline constexpr int kLoraTargets = 6;
inline constexpr std::unique_ptr<Linear> LayerWeights::*kLoraTargetSlots[kLoraTargets] = {
    &LayerWeights::receptance, &LayerWeights::key,     &LayerWeights::value,
    &LayerWeights::output,     &LayerWeights::ffn_key, &LayerWeights::ffn_value,
};
enum LoraTarget : int {
  kLoraReceptance = 0,
  kLoraKey = 1,
  kLoraValue = 2,
  kLoraOutput = 3,
  kLoraFfnKey = 4,
  kLoraFfnValue = 5,
  kLoraNone = -1,
};

struct LoraPair {
  std::unique_ptr<DenseLinear> down;  // A [r, in], fp32
  std::unique_ptr<DenseLinear> up;    // B [out, r], fp32
};

struct LoraLayer {
  std::array<LoraPair, kLoraTargets> pairs;  // down == null: not adapted
  // Replacement norms (only the kNorm members are used; empty = the base's).
  LayerWeights norms;
};

struct LoraWeights {
  Geometry geometry;
  std::vector<LoraLayer> layers;  // one per RWKV layer
  ModelWeights norms;             // ln0 / ln_out replacements (vectors only; empty = the base's)
  int rank = 0;
};

// `replacement` when the adapter replaces that norm, else `base`.
inline const std::vector<float>& pick_norm(const std::vector<float>& replacement,
                                           const std::vector<float>& base) {
  return replacement.empty() ? base : replacement;
}

// The multiplier of B·A as the passes apply it.
inline float applied_scale(const LoraAdapter& adapter) {
  return static_cast<float>(adapter.scale());
}

// Throws InputError when `adapter` was loaded for another geometry than `g`.
void check_adapter_geometry(const LoraAdapter& adapter, const Geometry& g);

}  // namespace wick::model

namespace wick {

struct LoraAdapter::Impl {
  std::string source;
  double alpha = 0, lora_scale = 1, scale = 0;
  std::vector<std::string> adapted, replaced;
  uint64_t parameters = 0;
  std::string fingerprint;
  std::string content_digest;  // SHA-256 (hex) of names, shapes and fp32 values, without the scale
  // The factors and norms: shared by every LoraAdapter made from one load() (with_scale()), which
  // differ only in the scale above (applied as float).
  std::shared_ptr<const model::LoraWeights> weights;
};

}  // namespace wick
