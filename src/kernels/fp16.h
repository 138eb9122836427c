// forwarding header: remove when the last includer moves
// (kernels/dot.h, model/synth.cpp and quant/quantize_file.cpp still include this path; dot_*.cpp,
// synth.cpp and quantize_file.cpp name f16_to_f32, f32_to_bf16 and f16_at in wick::kernels. The
// conversions live in base/fp16.h.)
#pragma once
#include "base/fp16.h"
namespace wick::kernels {
using base::f16_at;
using base::f16_to_f32;
using base::f32_to_bf16;
}  // namespace wick::kernels
