// forwarding header: remove when the last includer moves
// (model/tensor_reader.h, model/int8_linear.cpp and model/loader.cpp still include this path, and
// they, model/tensor_reader.cpp and model/load_rwkvx.cpp name io::Sha256; SHA-256 lives in
// base/sha256.h.)
#pragma once
#include "base/sha256.h"
namespace wick::io {
using base::Sha256;
using base::sha256_hex;
}  // namespace wick::io
