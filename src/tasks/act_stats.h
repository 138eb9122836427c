// Internals of the activation statistics (include/wick/act_stats.h): which trace of
// Model::forward() feeds which weight key, and the double-precision sums over the traced rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "wick/act_stats.h"
#include "wick/model.h"

namespace wick::tasks {

// The weight key (world name) whose matrix product reads the activation traced as `trace_name`
// at `layer` (the "in.*" names of wick/model.h), or "" for any other trace.
std::string act_stats_key(std::string_view trace_name, int layer);

// Sums of x^2 per input channel of every key of act_stats_keys(model), fed by the trace of
// forward() passes. Not thread-safe: one pass at a time (the trace is called on the thread that
// called forward()).
class ActStatsAccumulator {
 public:
  explicit ActStatsAccumulator(const Model& model);

  // Adds every row of a traced activation; names that are not matrix inputs are ignored.
  // Throws Error (an internal inconsistency) when cols differ from the key's input width.
  void add(std::string_view trace_name, int layer, const float* data, int64_t rows, int64_t cols);
  // Ends one pass over `rows` tokens. Throws Error (an internal inconsistency) unless every key
  // received exactly `rows` rows since the previous pass.
  void end_pass(int64_t rows);
  // Rows of all finished passes.
  int64_t rows() const { return rows_; }
  // sum / rows() per channel as float32; all zero before any row.
  ActStats means() const;

 private:
  struct Sum {
    std::vector<double> sum;
    int64_t pass_rows = 0;  // rows added in the current pass
  };
  std::map<std::string, Sum> sums_;
  int64_t rows_ = 0;
};

}  // namespace wick::tasks
