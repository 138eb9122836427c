// Activation statistics (include/wick/act_stats.h; docs/rwkvq-format.md §3.6).
#include "tasks/act_stats.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "model/tensor_table.h"
#include "tasks/perplexity.h"
#include "wick/errors.h"

namespace wick {
namespace tasks {
namespace {

// The projections whose inputs are recorded are the tensor table's rows with an input trace
// (model/tensor_table.h): in every block, and the head (layer -1).
template <class W>
const model::TensorSpec<W>* traced(std::span<const model::TensorSpec<W>> table,
                                   std::string_view trace_name) {
  for (const model::TensorSpec<W>& s : table)
    if (!s.trace.empty() && s.trace == trace_name) return &s;
  return nullptr;
}

std::string block_key(int layer, std::string_view name) {
  return fmt::format("blocks.{}.{}", layer, name);
}

}  // namespace

std::string act_stats_key(std::string_view trace_name, int layer) {
  if (layer == -1) {
    const auto* s = traced(model::model_tensors(), trace_name);
    return s ? std::string(s->name) : std::string();
  }
  if (layer < 0) return {};
  const auto* s = traced(model::layer_tensors(), trace_name);
  return s ? block_key(layer, s->name) : std::string();
}

ActStatsAccumulator::ActStatsAccumulator(const Model& model) {
  const Geometry& g = model.geometry();
  // One sum per input column of each recorded projection.
  auto add = [&]<class W>(std::span<const model::TensorSpec<W>> table, const std::string& prefix) {
    for (const model::TensorSpec<W>& s : table)
      if (!s.trace.empty()) {
        sums_[prefix + std::string(s.name)].sum.assign(
            static_cast<size_t>(model::dim_value(s.cols, g)), 0.0);
      }
  };
  for (int i = 0; i < g.n_layer; ++i) add(model::layer_tensors(), block_key(i, ""));
  if (model.has_lm_head()) add(model::model_tensors(), "");
}

void ActStatsAccumulator::add(std::string_view trace_name, int layer, const float* data,
                              int64_t rows, int64_t cols) {
  const std::string key = act_stats_key(trace_name, layer);
  if (key.empty()) return;
  auto it = sums_.find(key);
  if (it == sums_.end()) return;  // e.g. "in.head" of a model whose head is not recorded
  Sum& s = it->second;
  if (cols != static_cast<int64_t>(s.sum.size())) {
    throw Error(
        fmt::format("activation statistics: the trace of {} has {} columns, expected {} "
                    "(internal error)",
                    key, cols, s.sum.size()));
  }
  double* sum = s.sum.data();
  for (int64_t t = 0; t < rows; ++t) {
    const float* x = data + t * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[c];
      sum[c] += v * v;
    }
  }
  s.pass_rows += rows;
}

void ActStatsAccumulator::end_pass(int64_t rows) {
  for (auto& [key, s] : sums_) {
    if (s.pass_rows != rows) {
      throw Error(
          fmt::format("activation statistics: {} received {} rows in a pass over {} "
                      "tokens (internal error)",
                      key, s.pass_rows, rows));
    }
    s.pass_rows = 0;
  }
  rows_ += rows;
}

ActStats ActStatsAccumulator::means() const {
  ActStats out;
  for (const auto& [key, s] : sums_) {
    std::vector<float>& m = out[key];
    m.resize(s.sum.size());
    for (size_t c = 0; c < s.sum.size(); ++c)
      m[c] = rows_ > 0 ? static_cast<float>(s.sum[c] / static_cast<double>(rows_)) : 0.f;
  }
  return out;
}

}  // namespace tasks

std::vector<std::string> act_stats_keys(const Model& model) {
  std::vector<std::string> keys;
  for (int i = 0; i < model.geometry().n_layer; ++i)
    for (const model::LayerSpec& s : model::layer_tensors())
      if (!s.trace.empty()) keys.push_back(tasks::block_key(i, s.name));
  if (model.has_lm_head())
    for (const model::ModelSpec& s : model::model_tensors())
      if (!s.trace.empty()) keys.emplace_back(s.name);
  return keys;
}

ActStatsResult collect_act_stats(const Model& model, std::span<const std::vector<int32_t>> windows,
                                 const WindowProgress& progress) {
  if (!model.has_lm_head()) {
    throw InputError("activation statistics: " + model.info().source +
                     " has no LM head (an embedding backbone); the statistics include the input "
                     "of head.weight and need a language model");
  }
  tasks::check_windows(windows, model.geometry().vocab);
  tasks::ActStatsAccumulator acc(model);
  const ActivationTrace trace = [&acc](std::string_view name, int layer, const float* data,
                                       int64_t rows,
                                       int64_t cols) { acc.add(name, layer, data, rows, cols); };
  ActStatsResult r;
  r.ctx = static_cast<int64_t>(windows.front().size());
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::span<const int32_t> inputs =
        std::span<const int32_t>(windows[w]).first(windows[w].size() - 1);
    State state = model.new_state();
    model.forward(inputs, state, /*all_positions=*/true, &trace);
    acc.end_pass(static_cast<int64_t>(inputs.size()));
    if (static_cast<int64_t>(windows[w].size()) != r.ctx) r.ctx = 0;
    if (progress) progress(static_cast<int64_t>(w) + 1, static_cast<int64_t>(windows.size()));
  }
  r.stats = acc.means();
  r.tokens = acc.rows();
  r.windows = static_cast<int64_t>(windows.size());
  r.model_fingerprint = model.info().fingerprint;
  return r;
}

ActStatsResult collect_act_stats(const Model& model, const Tokenizer& tokenizer,
                                 std::string_view text, const WindowOptions& options,
                                 const WindowProgress& progress) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  const std::vector<std::vector<int32_t>> windows = cut_windows(ids, options);
  return collect_act_stats(model, windows, progress);
}

}  // namespace wick
