#include "generation_config.h"

#include <algorithm>

#include "binding.h"
#include "wick/errors.h"

namespace wick::py_binding {

uint64_t seed_arg(const py::object& seed) {
  if (seed.is_none()) return 0;
  if (!PyLong_Check(seed.ptr()) || PyBool_Check(seed.ptr()))
    throw py::type_error("seed: expected an int, got " +
                         std::string(Py_TYPE(seed.ptr())->tp_name));
  const unsigned long long v = PyLong_AsUnsignedLongLong(seed.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw InputError("seed: a seed is an unsigned 64-bit integer (0 to 2^64 - 1), found " +
                     py::str(seed).cast<std::string>());
  }
  return v;
}

SamplingConfig sampling_config(const SamplingArgs& a) {
  SamplingConfig sc = parse_sampler_mode(a.sampler) == SamplerMode::kChatRwkv
                          ? SamplingConfig::chatrwkv_pipeline()
                          : SamplingConfig{};
  sc.temperature = a.temperature;
  sc.top_p = a.top_p;
  sc.top_k = a.top_k;
  sc.presence_penalty = a.presence_penalty;
  sc.frequency_penalty = a.frequency_penalty;
  sc.penalty_decay = a.penalty_decay;
  sc.repetition_penalty = a.repetition_penalty;
  sc.seed = seed_arg(a.seed);
  if (a.logit_bias && !a.logit_bias.is_none()) {
    if (!PyDict_Check(a.logit_bias.ptr()))
      throw py::type_error("logit_bias: expected a dict {token id: value}, got " +
                           std::string(Py_TYPE(a.logit_bias.ptr())->tp_name));
    for (const auto& [key, value] : a.logit_bias.cast<py::dict>()) {
      const std::vector<int32_t> id = token_list(key, "logit_bias");
      if (!PyFloat_Check(value.ptr()) && !PyLong_Check(value.ptr()))
        throw py::type_error("logit_bias: values are numbers");
      sc.logit_bias.emplace_back(id.at(0), value.cast<float>());
    }
  }
  if (a.ban && !a.ban.is_none()) {
    const std::vector<int32_t> ids = token_list(a.ban, "ban");
    sc.banned_tokens.insert(sc.banned_tokens.end(), ids.begin(), ids.end());
  }
  return sc;
}

GenerationConfig generation_config(int max_tokens, const SamplingArgs& sampling,
                                   const py::object& stop, const py::object& stop_tokens,
                                   bool penalize_prompt, int vocab) {
  GenerationConfig c;
  c.max_tokens = max_tokens;
  c.sampling = sampling_config(sampling);
  c.stop_strings = string_list(stop, "stop");
  c.stop_tokens = stop_tokens.is_none() ? default_stop_tokens(vocab)
                                        : token_list(stop_tokens, "stop_tokens");
  c.penalize_prompt = penalize_prompt;
  c.validate(vocab);
  return c;
}

}  // namespace wick::py_binding
