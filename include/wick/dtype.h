// Element types of stored tensors. Weights stay in the dtype they were stored in; wick computes
// in fp32 (see model.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace wick {

enum class DType : uint8_t { F32, F16, BF16, I8, U8, I16, I32, I64 };

// Bytes per element.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I8:
      return 1;
    case DType::U8:
      return 1;
    case DType::I16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
  }
  return 0;
}

// The safetensors spelling ("F32", "BF16", ...).
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
    case DType::I16:
      return "I16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
  }
  return "?";
}

constexpr bool is_float_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

}  // namespace wick
