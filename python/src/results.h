// The result objects of generation: wick.GenerationResult (wick.generate) and wick.EngineResult
// (wick.Engine requests) share their fields, defined once here.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "wick/generate.h"

namespace wick::py_binding {

namespace py = pybind11;

// The generation timings as a dict: prefill_ms, decode_ms, sample_ms, decode_steps,
// prefill_tokens_per_s, decode_tokens_per_s (the names of `wick generate --json`).
py::dict timings_dict(const GenerationResult& r);

// Adds the GenerationResult fields to a class whose objects hold a result reachable through
// `get` (a function Box -> const GenerationResult&).
template <class Box, class Get>
void add_result_fields(py::class_<Box>& cls, Get get) {
  cls.def_property_readonly(
         "text", [get](const Box& b) { return py::str(get(b).text); },
         "The generated text (str; prompt, stop token and stop string excluded).")
      .def_property_readonly(
          "tokens", [get](const Box& b) { return get(b).tokens; },
          "Every generated id (list[int]), a stop token and the tokens of a stop string included.")
      .def_property_readonly(
          "stop_reason",
          [get](const Box& b) { return std::string(stop_reason_name(get(b).stop_reason)); },
          "\"max_tokens\", \"stop_token\", \"stop_string\", \"cancelled\", \"kv_cache_full\", "
          "\"deadline\" or \"error\".")
      .def_property_readonly(
          "stop_token",
          [get](const Box& b) -> py::object {
            const GenerationResult& r = get(b);
            if (r.stop_reason != StopReason::kStopToken) return py::none();
            return py::int_(r.stop_token);
          },
          "The stop token id with stop_reason \"stop_token\", else None.")
      .def_property_readonly(
          "stop_string",
          [get](const Box& b) -> py::object {
            const GenerationResult& r = get(b);
            if (r.stop_reason != StopReason::kStopString) return py::none();
            return py::str(r.stop_string);
          },
          "The stop string found with stop_reason \"stop_string\", else None.")
      .def_property_readonly("prompt_tokens", [get](const Box& b) { return get(b).prompt_tokens; })
      .def_property_readonly("generated_tokens",
                             [get](const Box& b) { return get(b).generated_tokens; })
      .def_property_readonly(
          "timings", [get](const Box& b) { return timings_dict(get(b)); },
          "dict: prefill_ms, decode_ms, sample_ms, decode_steps, prefill_tokens_per_s, "
          "decode_tokens_per_s.");
}

}  // namespace wick::py_binding
