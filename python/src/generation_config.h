// Keyword arguments of wick.generate / wick.Engine.submit / wick.Sampler -> the library's
// GenerationConfig and SamplingConfig, with the meanings and defaults of `wick generate`:
//   sampler "standard" starts from SamplingConfig{} (greedy), "chatrwkv" from
//   SamplingConfig::chatrwkv_pipeline() (the rwkv pip package's PIPELINE: order of operations,
//   space/digit exemption), then every value given here is applied over it - exactly what the
//   CLI does with every flag given (cli/generation_options.cpp make_generation_config). The
//   Python defaults are the CLI's standard defaults, so wick.generate(..., temperature=T,
//   top_p=P, ...) equals `wick generate --temperature T --top-p P ...`.
//   stop_tokens None adds wick::default_stop_tokens(vocab) (World vocabulary: id 0, end of text),
//   as the CLI does without --no-stop-eot; a list (even empty) is used as given.
// Validation is the library's (GenerationConfig::validate): wick.InputError names the field.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "wick/generate.h"
#include "wick/sampler.h"

namespace wick::py_binding {

struct SamplingArgs {
  std::string sampler = "standard";
  float temperature = 0.f;
  float top_p = 1.f;
  int top_k = 0;
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  float penalty_decay = 1.f;
  float repetition_penalty = 1.f;
  // int in [0, 2^64), or None: 0 - or, continuing a State that carries the sampler of the
  // generation that produced it, that sampler (wick/continuation.h continue_with)
  pybind11::object seed = pybind11::none();
  pybind11::object logit_bias;                // None or {id: value}
  pybind11::object ban;                       // None or a sequence of ids
};

// The sampler configuration (not yet validated against a vocabulary).
SamplingConfig sampling_config(const SamplingArgs& args);

// The generation configuration, validated against `vocab`.
GenerationConfig generation_config(int max_tokens, const SamplingArgs& sampling,
                                   const pybind11::object& stop,
                                   const pybind11::object& stop_tokens, bool penalize_prompt,
                                   int vocab);

// A seed given from Python: an int in [0, 2^64), None = 0 (wick.InputError for a negative or
// larger one, TypeError for a non-int).
uint64_t seed_arg(const pybind11::object& seed);

}  // namespace wick::py_binding
