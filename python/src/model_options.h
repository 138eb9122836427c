// The string options of wick.Model and the compat layer's strategies, parsed with the library's
// own names (wick/model.h: weight_quantization_name, precision_name), so Python accepts exactly
// the values `wick --quantize` / `--precision` accept.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "wick/model.h"

namespace wick::py_binding {

// "none" | "int8"; wick::InputError naming the accepted values otherwise.
WeightQuantization parse_quantize(const std::string& name);
// "fp32" | "bf16"; wick::InputError naming the accepted values otherwise.
Precision parse_precision(const std::string& name);

// Loads `path` (None: the embedded model) with the options; `threads` None or an int >= 1 (a
// Runtime of that many threads); `lora` None or an adapter path applied at run time with
// `lora_alpha` (None: the file's) and `lora_scale` (LoadOptions::lora*). Releases the GIL while
// loading.
Model load_model_with(const pybind11::object& path, const std::string& quantize,
                      const std::string& precision, const pybind11::object& threads,
                      const pybind11::object& lora = pybind11::none(),
                      std::optional<double> lora_alpha = std::nullopt, double lora_scale = 1.0);

}  // namespace wick::py_binding
