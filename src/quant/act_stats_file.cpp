// The activation-statistics file (include/wick/act_stats_file.h; docs/rwkvq-format.md §3.6).
#include "wick/act_stats_file.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "io/mapped_file.h"
#include "io/pth.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "wick/errors.h"

namespace wick {

void save_act_stats(const std::string& path, const ActStatsResult& result) {
  if (result.stats.empty())
    throw InputError("activation statistics for " + path + ": nothing to write (no key)");
  std::vector<io::TensorToWrite> tensors;
  tensors.reserve(result.stats.size());
  for (const auto& [key, values] : result.stats) {
    if (values.empty())
      throw InputError("activation statistics for " + path + ": key " + key +
                       " has no channel; every vector needs its input width IN >= 1");
    tensors.push_back({key,
                       DType::F32,
                       {static_cast<int64_t>(values.size())},
                       std::string_view(reinterpret_cast<const char*>(values.data()),
                                        values.size() * sizeof(float))});
  }
  const std::map<std::string, std::string> metadata = {
      {"format", kActStatsFormat},
      {"model_fingerprint", result.model_fingerprint},
      {"tokens", std::to_string(result.tokens)},
      {"windows", std::to_string(result.windows)},
      {"ctx", std::to_string(result.ctx)},
      {"description",
       fmt::format("E[x^2] per input channel of each matrix product, mean over {} tokens in {} "
                   "windows (wick act-stats, fp32 forward)",
                   result.tokens, result.windows)},
  };
  io::write_safetensors(path, tensors, metadata);
}

ActStats load_act_stats(const std::string& path, std::map<std::string, std::string>* metadata) {
  std::shared_ptr<io::MappedFile> file = io::MappedFile::open(path);
  if (io::looks_like_zip(*file)) {
    throw FormatError(path, "", "a safetensors file of F32 [IN] vectors (activation statistics)",
                      "a zip archive - a torch.save pickle such as rwkv-quant's act_stats .pt; "
                      "collect the statistics with `wick act-stats` instead");
  }
  const io::TensorSet set = io::read_safetensors(file);
  const auto& meta = set.metadata();
  if (auto it = meta.find("format"); it != meta.end()) {
    const std::string_view prefix = "wick-act-stats-";
    if (it->second.starts_with(prefix) && it->second != kActStatsFormat) {
      throw FormatError(path, "", std::string("format '") + kActStatsFormat + "'",
                        "format '" + it->second +
                            "' (written by another version of wick; collect the statistics "
                            "again with this one)");
    }
  }
  if (set.tensors().empty()) {
    throw FormatError(path, "", "at least one F32 [IN] vector (activation statistics)",
                      "no tensor");
  }
  ActStats out;
  for (const io::TensorView& t : set.tensors()) {
    if (t.dtype != DType::F32 || t.shape.size() != 1 || t.shape[0] < 1) {
      throw FormatError(
          path, t.name, "an F32 vector [IN] of E[x^2] per input channel (activation statistics)",
          std::string(dtype_name(t.dtype)) + " " + t.shape_string() +
              (t.shape.size() >= 2 ? " (a weight matrix: is this a model file?)" : ""));
    }
    std::vector<float> v(static_cast<size_t>(t.shape[0]));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    for (size_t c = 0; c < v.size(); ++c) {
      if (!(v[c] >= 0.f) || std::isinf(v[c])) {
        throw FormatError(path, t.name, "finite values >= 0 (a mean of squares)",
                          fmt::format("{} at channel {}", v[c], c));
      }
    }
    out.emplace(t.name, std::move(v));
  }
  if (metadata) *metadata = meta;
  return out;
}

}  // namespace wick
