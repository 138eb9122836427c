// Private definition of Model::Impl: the loaded weights plus what keeps their bytes alive.
#pragma once

#include <memory>
#include <vector>

#include "io/tensor_set.h"
#include "model/weights.h"
#include "quant/rwkvq.h"
#include "wick/model.h"

namespace wick {

struct Model::Impl {
  Geometry geometry;
  ModelInfo info;
  model::ModelWeights weights;
  std::vector<io::TensorSet> sources;  // keeps the mapped files alive
};

namespace model {

// Builds the model from the tensors of one checkpoint (any naming convention). `hf_config` is the
// text of an fla/HF config.json, or empty. Throws CheckpointError.
// `packed`: the .rwkvq file when `tensors` is its logical view (see Model::load), else null.
std::shared_ptr<Model::Impl> build_model(io::TensorSet tensors, const std::string& hf_config,
                                         const std::string& config_path,
                                         const quant::RwkvqFile* packed = nullptr);

}  // namespace model
}  // namespace wick
