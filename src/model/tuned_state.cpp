// State-tuning files (wick/tuned_state.h): one time_state [H, N, N] per layer, taken as stored.
#include "wick/tuned_state.h"

#include <charconv>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "io/mapped_file.h"
#include "io/tensor_set.h"
#include "wick/errors.h"

namespace wick {
namespace {

constexpr const char* kSuffix = ".att.time_state";
constexpr const char* kWickStateKey = "wick.state";  // state_file.cpp's format key

// "blocks.{i}.att.time_state" (optionally under "rwkv.") -> i; -1 when the name is not one.
int64_t time_state_layer(const std::string& name) {
  std::string_view s = name;
  if (s.starts_with("rwkv.")) s.remove_prefix(5);
  if (!s.starts_with("blocks.") || !s.ends_with(kSuffix)) return -1;
  s.remove_prefix(7);
  s.remove_suffix(std::strlen(kSuffix));
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return -1;
  int64_t i = -1;
  auto res = std::from_chars(s.data(), s.data() + s.size(), i);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size()) return -1;
  return i;
}

io::TensorSet read_file(const std::string& path) {
  return io::read_tensor_file(io::MappedFile::open(path));
}

bool looks_tuned(const io::TensorSet& set) {
  if (set.metadata().count(kWickStateKey) || set.size() == 0) return false;
  for (const io::TensorView& t : set.tensors())
    if (time_state_layer(t.name) >= 0) return true;
  return false;
}

State tuned_from(const io::TensorSet& set, const std::string& path, const Model& model) {
  if (set.metadata().count(kWickStateKey))
    throw StateFileError(path,
                         "this is a wick state file, not a state-tuning file; continue it with "
                         "--load-state (wick::load_state)");
  const State zero = model.new_state();
  const int L = zero.n_layer(), H = zero.n_head(), N = zero.head_size();
  const std::string want =
      "[" + std::to_string(H) + ", " + std::to_string(N) + ", " + std::to_string(N) + "]";
  std::map<int64_t, const io::TensorView*> layers;
  for (const io::TensorView& t : set.tensors()) {
    const int64_t i = time_state_layer(t.name);
    if (i < 0)
      throw StateFileError(
          path, "tensor '" + t.name +
                    "' is not a state-tuning tensor (expected only blocks.{i}.att.time_state, as "
                    "RWKV-PEFT state tuning saves them); a LoRA adapter goes to --lora, a wick "
                    "state file to --load-state");
    if (i >= L)
      throw StateFileError(path, "'" + t.name + "' is for layer " + std::to_string(i) +
                                     " but the model has " + std::to_string(L) + " layers (0.." +
                                     std::to_string(L - 1) +
                                     "); the file was tuned for another model");
    if (!layers.emplace(i, &t).second)
      throw StateFileError(path, "layer " + std::to_string(i) + " has two time_state tensors");
  }
  if (layers.empty())
    throw StateFileError(path, "holds no tensors; expected blocks.{i}.att.time_state per layer");
  if (static_cast<int>(layers.size()) != L) {
    int missing = 0;
    while (layers.count(missing)) ++missing;
    throw StateFileError(path, "has time_state for " + std::to_string(layers.size()) +
                                   " layers but the model has " + std::to_string(L) + " (layer " +
                                   std::to_string(missing) +
                                   " is missing); the file was tuned for another model");
  }
  State state = zero;
  for (const auto& [i, t] : layers) {
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      throw StateFileError(path, "'" + t->name + "' is " + std::string(dtype_name(t->dtype)) +
                                     "; a time_state must be bf16, fp16 or fp32");
    if (t->shape != std::vector<int64_t>{H, N, N})
      throw StateFileError(path, "'" + t->name + "' has shape " + t->shape_string() +
                                     " but this model's heads need " + want +
                                     " (H heads of N channels); the file was tuned for another "
                                     "model");
    bool nan = false;
    const int64_t bad = io::first_nonfinite(*t, &nan);
    if (bad >= 0)
      throw StateFileError(path, "'" + t->name + "' holds a " + (nan ? "NaN" : "infinity") +
                                     " at element " + std::to_string(bad) +
                                     "; the tuned state is damaged");
    const std::vector<float> v = io::to_f32(*t);
    std::memcpy(state.wkv(static_cast<int>(i)), v.data(), v.size() * sizeof(float));
  }
  return state;
}

}  // namespace

State load_tuned_state(const std::string& path, const Model& model) {
  return tuned_from(read_file(path), path, model);
}

bool is_tuned_state_file(const std::string& path) {
  try {
    return looks_tuned(read_file(path));
  } catch (const Error&) {
    return false;
  }
}

LoadedState load_any_state(const std::string& path, const Model& model, bool allow_other_base) {
  if (!is_tuned_state_file(path)) return load_state(path, model, allow_other_base);
  LoadedState out;
  out.state = load_tuned_state(path, model);
  out.info.n_tokens = 0;
  out.info.note = "state-tuned initial state from " + path;
  return out;
}

}  // namespace wick
