// What the `wick bench*` subcommands say about a loaded model's products: the weight format a
// record names, and which peak limits the products (the fp32 FMA peak, or the BF16 dot peak where
// they run vdpbf16ps). Pure functions of the model and the process's kernel choices.
#pragma once

#include <string>

#include "wick/model.h"

namespace wick::cli {

// The format holding most parameters: "int8" (quantised at load), "rwkvq <layout>" (the layout
// of most packed parameters, e.g. "rwkvq sb6@4"), else the dtype of most parameters ("bf16", ...).
std::string weight_format(const ModelInfo& info);

// Whether the model's large products run the BF16 dot product (vdpbf16ps): bf16 precision, bf16
// weights (weight_format "bf16"), a bf16-dot kernel chosen (WICK_ISA does not cap it) and a CPU
// whose BF16 dot peak the probes can measure (bench/probes.h has_bf16_dot_peak). Their limit is
// then that peak, not the fp32 FMA peak.
bool products_run_bf16_dot(const Model& model);

}  // namespace wick::cli
